//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseMetrics parses Prometheus's text format with Prometheus's own parser and returns
// every unlabelled sample by name; a malformed exposition fails the test.
func parseMetrics(t testing.TB, text string) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, text)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) > 0 {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				out[name] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func scrape(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape %s: %d %v", addr, resp.StatusCode, err)
	}
	return parseMetrics(t, string(b))
}

func wantMetric(t testing.TB, m map[string]float64, name string, ok func(float64) bool, what string) {
	t.Helper()
	v, found := m[name]
	if !found || !ok(v) {
		t.Errorf("%s = %v (present %v), want %s", name, v, found, what)
	}
}

func positive(v float64) bool { return v > 0 }

// TestMetrics: --metrics-file after a good and a failed backup (the failure keeps the
// last success's time and counts itself), and /metrics of serve across a clone and of
// binlog-archive while it stores, all parsed with Prometheus's text parser.
func TestMetrics(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{})
	src.Exec(t, "CREATE DATABASE m")
	src.Exec(t, "CREATE TABLE m.t (id INT PRIMARY KEY, v CHAR(200)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO m.t SELECT seq, REPEAT('x', 200) FROM m.seq_1_to_20000")
	tmp := testdb.ShortDir(t)
	prom := filepath.Join(tmp, "ferry_backup.prom")

	mustFerry(t, backupArgs(src, filepath.Join(tmp, "b1"), "--metrics-file", prom)...)
	first := readProm(t, prom)
	wantMetric(t, first, "ferry_backup_success", func(v float64) bool { return v == 1 }, "1")
	for _, n := range []string{"ferry_backup_duration_seconds", "ferry_backup_read_bytes", "ferry_backup_stored_bytes", "ferry_backup_last_success_timestamp_seconds", "ferry_backup_last_run_timestamp_seconds"} {
		wantMetric(t, first, n, positive, "> 0")
	}
	wantMetric(t, first, "ferry_backup_read_bytes", func(v float64) bool { return v > 20000*200 }, "more than the table's rows")
	wantMetric(t, first, "ferry_backup_failures_total", func(v float64) bool { return v == 0 }, "0")
	if _, ok := first["ferry_backup_redo_kept_bytes"]; !ok {
		t.Error("ferry_backup_redo_kept_bytes is missing")
	}

	time.Sleep(1100 * time.Millisecond)
	wantFail(t, nil, "not empty", backupArgs(src, filepath.Join(tmp, "b1"), "--metrics-file", prom)...)
	failed := readProm(t, prom)
	wantMetric(t, failed, "ferry_backup_success", func(v float64) bool { return v == 0 }, "0 after a failure")
	wantMetric(t, failed, "ferry_backup_failures_total", func(v float64) bool { return v == 1 }, "1")
	wantMetric(t, failed, "ferry_backup_last_success_timestamp_seconds", func(v float64) bool { return v == first["ferry_backup_last_success_timestamp_seconds"] }, "the first run's")
	wantMetric(t, failed, "ferry_backup_last_run_timestamp_seconds", func(v float64) bool { return v > first["ferry_backup_last_run_timestamp_seconds"] }, "later than the first run's")
	if _, ok := failed["ferry_backup_read_bytes"]; ok {
		t.Error("a failed run reports read bytes")
	}

	// serve: counters before and after one clone.
	token := writeFile(t, tmp, "token", "correct horse battery staple 7f3a")
	addr := "127.0.0.1:" + strconv.Itoa(testdb.FreePort(t))
	maddr := "127.0.0.1:" + strconv.Itoa(testdb.FreePort(t))
	startFerry(t, nil, "serve", "--listen", addr, "--token-file", token, "--socket", src.Socket, "--user", "root", "--metrics-listen", maddr)
	var before map[string]float64
	waitFor(t, 30*time.Second, "serve's /metrics", func() bool {
		resp, err := http.Get("http://" + maddr + "/metrics")
		if err == nil {
			resp.Body.Close()
			before = scrape(t, maddr)
		}
		return err == nil
	})
	wantMetric(t, before, "ferry_serve_clones_started_total", func(v float64) bool { return v == 0 }, "0 before a clone")
	wantMetric(t, before, "process_resident_memory_bytes", positive, "> 0")
	cloneProm := filepath.Join(tmp, "ferry_clone.prom")
	var out result
	waitFor(t, 30*time.Second, "ferry serve listening", func() bool {
		out = ferry(t, nil, "clone", "--from", addr, "--token-file", token, "--datadir", filepath.Join(tmp, "clone"), "--metrics-file", cloneProm)
		return out.err == nil || !strings.Contains(out.stderr, "is ferry serve running there")
	})
	if out.err != nil {
		t.Fatalf("clone: %v\n%s", out.err, tail(out.stderr, 10))
	}
	after := scrape(t, maddr)
	wantMetric(t, after, "ferry_serve_clones_succeeded_total", func(v float64) bool { return v == 1 }, "1 after a clone")
	wantMetric(t, after, "ferry_serve_clones_active", func(v float64) bool { return v == 0 }, "0")
	wantMetric(t, after, "ferry_serve_sent_bytes_total", func(v float64) bool { return v > 20000*200/4 }, "the clone's bytes")
	wantMetric(t, readProm(t, cloneProm), "ferry_clone_success", func(v float64) bool { return v == 1 }, "1")

	// binlog-archive: stored bytes grow while it follows the server.
	repoDir := filepath.Join(tmp, "repo")
	if err := os.Mkdir(repoDir, 0o750); err != nil {
		t.Fatal(err)
	}
	aaddr := "127.0.0.1:" + strconv.Itoa(testdb.FreePort(t))
	startFerry(t, nil, "binlog-archive", "--repo", repoDir, "--socket", src.Socket, "--user", "root", "--metrics-listen", aaddr)
	var arch map[string]float64
	waitFor(t, 60*time.Second, "the archiver to store the binlog", func() bool {
		src.Exec(t, "INSERT INTO m.t VALUES (30000 + FLOOR(RAND()*1000000), 'y') ON DUPLICATE KEY UPDATE v = 'z'")
		resp, err := http.Get("http://" + aaddr + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		arch = scrape(t, aaddr)
		return arch["ferry_binlog_archive_stored_bytes_total"] > 0
	})
	wantMetric(t, arch, "ferry_binlog_archive_connected", func(v float64) bool { return v == 1 }, "1")
	wantMetric(t, arch, "ferry_binlog_archive_last_event_timestamp_seconds", func(v float64) bool { return v > float64(time.Now().Add(-time.Hour).Unix()) }, "within the hour")
	wantMetric(t, arch, "ferry_binlog_archive_gaps_total", func(v float64) bool { return v == 0 }, "0")
}

func readProm(t testing.TB, path string) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--metrics-file: %v", err)
	}
	return parseMetrics(t, string(b))
}
