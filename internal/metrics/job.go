// Package metrics exports what ferry does in Prometheus's formats: a textfile for
// node_exporter's textfile collector when a job (backup, restore) ends, and the
// counters of the long-running verbs (serve, binlog-archive) on an HTTP /metrics.
// Everything is written with the official client library.
package metrics

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ferry-backup/ferry/internal/setting"
)

// Job is the outcome of one run of a verb.
type Job struct {
	Verb       string // backup, restore, ...: the metrics are named ferry_<verb>_...
	Start, End time.Time
	Err        error
	// Values are the job's numbers by metric suffix (read_bytes, stored_bytes,
	// redo_kept_bytes, pages_recopied, ...), exported as gauges of the last run.
	Values map[string]float64
}

// Help texts of the values the verbs report; a value without one gets a generic text.
var valueHelp = map[string]string{
	"read_bytes":           "Bytes of the server's files the last run copied.",
	"stored_bytes":         "Bytes the last run stored at its end (after compression and encryption).",
	"restored_bytes":       "Bytes the last run wrote into the datadir.",
	"redo_kept_bytes":      "Bytes of redo log the last run kept for recovery.",
	"pages_recopied":       "Pages the last run's three-stage copy copied again.",
	"page_rereads":         "Torn pages the last run read again.",
	"lock_seconds":         "Seconds the last run held BLOCK_COMMIT (the same as block_commit_seconds).",
	"block_ddl_seconds":    "Seconds the last run held BACKUP STAGE BLOCK_DDL (DDL waits).",
	"block_commit_seconds": "Seconds the last run held BACKUP STAGE BLOCK_COMMIT (commits wait).",
	"restore_seconds":      "Seconds the last restore drill took to a server running on the restored copy.",
	"tables_checked":       "Tables the last restore drill ran CHECK TABLE on.",
	"tables_checksummed":   "Tables the last restore drill read whole (CHECKSUM TABLE).",
}

var validSuffix = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// WriteTextfile writes the job's metrics to path (atomically: a temporary file
// renamed over it). The time of the last success and the failure count are carried
// over from the file it replaces, so a failed run keeps the last success visible.
func WriteTextfile(path string, j Job) error {
	if !validSuffix.MatchString(j.Verb) {
		return fmt.Errorf("metrics: bad verb %q", j.Verb)
	}
	prev := readPrevious(path)
	p := "ferry_" + j.Verb + "_"
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, v float64) {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: p + name, Help: help})
		g.Set(v)
		reg.MustRegister(g)
	}
	success, lastSuccess, failures := 0.0, prev[p+"last_success_timestamp_seconds"], prev[p+"failures_total"]
	if j.Err == nil {
		success, lastSuccess = 1, float64(j.End.UnixMilli())/1000
	} else {
		failures++
	}
	gauge("success", "1 if the last run succeeded, 0 if it failed.", success)
	gauge("last_run_timestamp_seconds", "When the last run ended (Unix time).", float64(j.End.UnixMilli())/1000)
	gauge("duration_seconds", "How long the last run took.", j.End.Sub(j.Start).Seconds())
	if lastSuccess > 0 {
		gauge("last_success_timestamp_seconds", "When the last successful run ended (Unix time).", lastSuccess)
	}
	fails := prometheus.NewCounter(prometheus.CounterOpts{Name: p + "failures_total", Help: "Failed runs recorded in this file."})
	fails.Add(failures)
	reg.MustRegister(fails)
	if j.Err == nil {
		for name, v := range j.Values {
			if !validSuffix.MatchString(name) {
				return fmt.Errorf("metrics: bad metric name %q", name)
			}
			help, ok := valueHelp[name]
			if !ok {
				help = "Reported by the last successful run."
			}
			gauge(name, help, v)
		}
	}
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return setting.Errorf("%s %s: %w", setting.MetricsFile, path, err)
	}
	return nil
}

// readPrevious reads the values of the file a run replaces; nothing if it is missing
// or does not parse (it is then rewritten from scratch).
func readPrevious(path string) map[string]float64 {
	out := map[string]float64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return out
	}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
