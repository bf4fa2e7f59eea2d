package progress

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines collects a JSON logger's records, safe for the reporter's goroutine.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the records logged so far.
func (l *lines) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("log line %q: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

// waitFor returns the first record that ok accepts, polling the log lines written
// every few milliseconds.
func (l *lines) waitFor(t *testing.T, what string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, r := range l.records(t) {
			if ok(r) {
				return r
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no log line %s; got %v", what, l.records(t))
	return nil
}

const mib = 1 << 20

// TestLogLines: off a terminal the reporter logs a line at its interval, named after
// the stage, with the bytes done and expected, the percentage and an ETA while bytes
// remain; the total grows with AddTotal; nothing is logged after Finish.
func TestLogLines(t *testing.T) {
	out := &lines{}
	log := slog.New(slog.NewJSONHandler(out, nil))
	r := New(Options{Label: "backup: copy", Total: 4 * mib, Log: log, Every: 5 * time.Millisecond})
	r.Add(3 * mib)
	if r.Done() != 3*mib {
		t.Fatalf("Done = %d, want %d", r.Done(), 3*mib)
	}
	rec := out.waitFor(t, "with 3 MiB done", func(m map[string]any) bool { return m["done_mib"] == 3.0 })
	if rec["msg"] != "backup: copy" || rec["total_mib"] != 4.0 || rec["percent"] != 75.0 {
		t.Errorf("line %v: want msg \"backup: copy\", total_mib 4, percent 75", rec)
	}
	if eta, ok := rec["eta"].(string); !ok {
		t.Errorf("line %v has no eta while bytes remain", rec)
	} else if _, err := time.ParseDuration(eta); err != nil {
		t.Errorf("eta %q: %v", eta, err)
	}
	if rec["mib_per_s"] == nil {
		t.Errorf("line %v has no rate", rec)
	}

	r.Stage("backup: re-copy round 1")
	r.AddTotal(4 * mib)
	r.Add(5 * mib)
	rec = out.waitFor(t, "of the new stage", func(m map[string]any) bool {
		return m["msg"] == "backup: re-copy round 1" && m["done_mib"] == 8.0
	})
	if rec["total_mib"] != 8.0 || rec["percent"] != 100.0 {
		t.Errorf("line %v: want total_mib 8, percent 100", rec)
	}
	if _, ok := rec["eta"]; ok {
		t.Errorf("line %v has an eta with nothing left", rec)
	}

	r.Finish()
	n := len(out.records(t))
	time.Sleep(30 * time.Millisecond) // six intervals
	if m := len(out.records(t)); m != n {
		t.Errorf("%d lines logged after Finish", m-n)
	}
}

// TestUnknownTotal: without a total, a line has no percentage and no ETA.
func TestUnknownTotal(t *testing.T) {
	out := &lines{}
	r := New(Options{Label: "restore", Log: slog.New(slog.NewJSONHandler(out, nil)), Every: 5 * time.Millisecond})
	r.Add(2 * mib)
	rec := out.waitFor(t, "with 2 MiB done", func(m map[string]any) bool { return m["done_mib"] == 2.0 })
	r.Finish()
	for _, k := range []string{"percent", "eta"} {
		if _, ok := rec[k]; ok {
			t.Errorf("line %v has %s without a total", rec, k)
		}
	}
}

// TestTerminalBar: on a terminal the reporter draws a bar on Out, named after the
// stage, and logs nothing.
func TestTerminalBar(t *testing.T) {
	var bar lines
	logged := &lines{}
	r := New(Options{Label: "backup: copy", Total: 10 * mib, Terminal: true, Out: &bar,
		Log: slog.New(slog.NewJSONHandler(logged, nil)), Every: time.Millisecond})
	r.Add(mib) // the first Add draws the bar
	bar.mu.Lock()
	drawn := bar.buf.String()
	bar.mu.Unlock()
	if !strings.Contains(drawn, "backup: copy") || !strings.Contains(drawn, "10 MB") {
		t.Errorf("the bar does not show the label and the total: %q", drawn)
	}
	r.Add(9 * mib)
	r.Stage("backup: finishing")
	r.AddTotal(mib)
	r.Add(mib)
	r.Finish()
	if r.Done() != 11*mib {
		t.Errorf("Done = %d, want %d", r.Done(), 11*mib)
	}
	if recs := logged.records(t); len(recs) != 0 {
		t.Errorf("logged %v on a terminal", recs)
	}
}
