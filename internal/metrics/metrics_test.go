package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/archiver"
	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one metric of exposition text: its value, TYPE and HELP.
type sample struct {
	value      float64
	typ, help  string
	seen, dupe bool
}

// parse reads Prometheus exposition text back: it must be valid for the official
// parser, and every metric of it has one unlabelled sample.
func parse(t *testing.T, r io.Reader) map[string]*sample {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(bytes.NewReader(b)); err != nil {
		t.Fatalf("not valid exposition text: %v\n%s", err, b)
	}
	out := map[string]*sample{}
	get := func(name string) *sample {
		if out[name] == nil {
			out[name] = &sample{}
		}
		return out[name]
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, " ", 4)
		switch {
		case len(f) == 4 && f[0] == "#" && f[1] == "HELP":
			get(f[2]).help = f[3]
		case len(f) == 4 && f[0] == "#" && f[1] == "TYPE":
			get(f[2]).typ = f[3]
		case len(f) == 2 && !strings.Contains(f[0], "{"):
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			s := get(f[0])
			s.dupe = s.seen
			s.value, s.seen = v, true
		}
	}
	return out
}

// expect checks the metrics hold name, with one sample of the value and type given.
func expect(t *testing.T, fams map[string]*sample, name string, want float64, typ string) {
	t.Helper()
	s, ok := fams[name]
	switch {
	case !ok || !s.seen:
		t.Errorf("%s: missing", name)
	case s.dupe:
		t.Errorf("%s: more than one sample", name)
	case s.value != want || s.typ != typ:
		t.Errorf("%s = %v (%s), want %v (%s)", name, s.value, s.typ, want, typ)
	}
}

func readTextfile(t *testing.T, path string) map[string]*sample {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return parse(t, f)
}

// TestTextfileSuccessThenFailures: a successful run writes its status, times and
// values; a failed run after it says so, counts the failure, keeps the last success's
// time and drops the values; the count grows with each failure and a success keeps it.
func TestTextfileSuccessThenFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry_backup.prom")
	start := time.Unix(1764225600, 0)
	end := start.Add(90*time.Second + 500*time.Millisecond)
	ok := Job{Verb: "backup", Start: start, End: end,
		Values: map[string]float64{"read_bytes": 1 << 30, "block_commit_seconds": 0.003, "custom_value": 7}}
	if err := WriteTextfile(path, ok); err != nil {
		t.Fatal(err)
	}
	fams := readTextfile(t, path)
	gauge, counter := "gauge", "counter"
	expect(t, fams, "ferry_backup_success", 1, gauge)
	expect(t, fams, "ferry_backup_duration_seconds", 90.5, gauge)
	expect(t, fams, "ferry_backup_last_run_timestamp_seconds", 1764225690.5, gauge)
	expect(t, fams, "ferry_backup_last_success_timestamp_seconds", 1764225690.5, gauge)
	expect(t, fams, "ferry_backup_failures_total", 0, counter)
	expect(t, fams, "ferry_backup_read_bytes", 1<<30, gauge)
	expect(t, fams, "ferry_backup_block_commit_seconds", 0.003, gauge)
	expect(t, fams, "ferry_backup_custom_value", 7, gauge)
	if h := fams["ferry_backup_read_bytes"].help; h != valueHelp["read_bytes"] {
		t.Errorf("read_bytes help = %q, want its own text", h)
	}
	if h := fams["ferry_backup_custom_value"].help; h == "" {
		t.Error("a value without its own help text has none")
	}

	for n := 1; n <= 2; n++ {
		failed := Job{Verb: "backup", Start: end, End: end.Add(time.Duration(n) * time.Minute), Err: errors.New("boom"),
			Values: map[string]float64{"read_bytes": 5}}
		if err := WriteTextfile(path, failed); err != nil {
			t.Fatal(err)
		}
		fams = readTextfile(t, path)
		expect(t, fams, "ferry_backup_success", 0, gauge)
		expect(t, fams, "ferry_backup_failures_total", float64(n), counter)
		expect(t, fams, "ferry_backup_last_success_timestamp_seconds", 1764225690.5, gauge)
		expect(t, fams, "ferry_backup_last_run_timestamp_seconds", float64(end.Add(time.Duration(n)*time.Minute).UnixMilli())/1000, gauge)
		if _, has := fams["ferry_backup_read_bytes"]; has {
			t.Error("a failed run exported its values")
		}
	}

	later := end.Add(time.Hour)
	if err := WriteTextfile(path, Job{Verb: "backup", Start: end, End: later}); err != nil {
		t.Fatal(err)
	}
	fams = readTextfile(t, path)
	expect(t, fams, "ferry_backup_success", 1, gauge)
	expect(t, fams, "ferry_backup_failures_total", 2, counter)
	expect(t, fams, "ferry_backup_last_success_timestamp_seconds", float64(later.UnixMilli())/1000, gauge)
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("the directory holds %d files, want only the textfile (no temporary left)", len(ents))
	}
}

// TestTextfileFirstFailureAndGarbage: a first run that fails has no last success;
// a file that does not parse is replaced from scratch.
func TestTextfileFirstFailureAndGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry_restore.prom")
	if err := os.WriteFile(path, []byte("this is { not exposition text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1764225600, 0)
	if err := WriteTextfile(path, Job{Verb: "restore", Start: t0, End: t0.Add(time.Second), Err: errors.New("x")}); err != nil {
		t.Fatal(err)
	}
	fams := readTextfile(t, path)
	expect(t, fams, "ferry_restore_failures_total", 1, "counter")
	if _, has := fams["ferry_restore_last_success_timestamp_seconds"]; has {
		t.Error("a last success time without any success")
	}
}

// TestTextfileRefusesBadNames: a verb or value name that is not a metric name is
// refused, and nothing is written.
func TestTextfileRefusesBadNames(t *testing.T) {
	dir := t.TempDir()
	for _, j := range []Job{
		{Verb: "Back-up"},
		{Verb: "backup", Values: map[string]float64{"bad name": 1}},
	} {
		path := filepath.Join(dir, "m.prom")
		if err := WriteTextfile(path, j); err == nil || !strings.Contains(err.Error(), "bad") {
			t.Errorf("WriteTextfile(%+v) = %v, want a refusal", j, err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("a refused job left %s", path)
		}
	}
}

// TestListenServesCounters: /metrics serves the archiver's and the donor's counters
// (read when scraped, so later changes show) with the runtime's, as valid exposition
// text; a taken address is an error at once, and the endpoint stops with its context.
func TestListenServesCounters(t *testing.T) {
	reg := NewRegistry()
	var as archiver.Stats
	var ss clone.ServeStats
	RegisterArchiver(reg, &as)
	RegisterServe(reg, &ss)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, err := Listen(ctx, "127.0.0.1:0", reg, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(ctx, addr.String(), reg, log); err == nil || !strings.Contains(err.Error(), addr.String()) {
		t.Errorf("Listen on a taken address = %v, want an error naming it", err)
	}
	url := "http://" + addr.String() + "/metrics"
	scrape := func() map[string]*sample {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %s", resp.Status)
		}
		return parse(t, resp.Body)
	}
	gauge, counter := "gauge", "counter"
	fams := scrape()
	expect(t, fams, "ferry_binlog_archive_connected", 0, gauge)
	expect(t, fams, "ferry_serve_clones_started_total", 0, counter)
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	as.StoredBytes.Store(4096)
	as.Segments.Store(3)
	as.Reconnects.Store(2)
	as.Gaps.Store(1)
	as.Connected.Store(true)
	as.LastStored.Store(1764225600)
	as.LastEventTime.Store(1764225599)
	ss.Started.Store(5)
	ss.Succeeded.Store(3)
	ss.Failed.Store(1)
	ss.Active.Store(1)
	ss.BytesSent.Store(1 << 20)
	ss.LastSuccess.Store(1764225700)
	ss.LastDuration.Store(2500)
	fams = scrape()
	for name, want := range map[string]float64{
		"ferry_binlog_archive_stored_bytes_total": 4096,
		"ferry_binlog_archive_segments_total":     3,
		"ferry_binlog_archive_reconnects_total":   2,
		"ferry_binlog_archive_gaps_total":         1,
		"ferry_serve_clones_started_total":        5,
		"ferry_serve_clones_succeeded_total":      3,
		"ferry_serve_clones_failed_total":         1,
		"ferry_serve_sent_bytes_total":            1 << 20,
	} {
		expect(t, fams, name, want, counter)
	}
	for name, want := range map[string]float64{
		"ferry_binlog_archive_connected":                    1,
		"ferry_binlog_archive_last_store_timestamp_seconds": 1764225600,
		"ferry_binlog_archive_last_event_timestamp_seconds": 1764225599,
		"ferry_serve_clones_active":                         1,
		"ferry_serve_last_success_timestamp_seconds":        1764225700,
		"ferry_serve_last_duration_seconds":                 2.5,
	} {
		expect(t, fams, name, want, gauge)
	}

	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("the endpoint still serves after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
