package main

import (
	"context"
	"time"

	"github.com/ferry-backup/ferry/internal/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// jobMetrics is a job verb's --metrics-file and the numbers the verb reports for it.
type jobMetrics struct {
	file   string
	values map[string]float64
}

// addFile declares --metrics-file.
func (jm *jobMetrics) addFile(f *pflag.FlagSet) {
	f.StringVar(&jm.file, "metrics-file", "", "when the job ends, write its metrics here for node_exporter's textfile collector (e.g. /var/lib/node_exporter/ferry_backup.prom); the last success and the failure count are kept across runs")
}

// set records one number of the job (named as the metric's suffix).
func (jm *jobMetrics) set(name string, v float64) {
	if jm.values == nil {
		jm.values = map[string]float64{}
	}
	jm.values[name] = v
}

// wrap runs the verb and writes its metrics, failed or not. A failure to write them
// fails a job that succeeded; a failed job's own error is the one reported.
func (jm *jobMetrics) wrap(verb string, g *globals, run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		start := time.Now()
		err := run(cmd, args)
		if jm.file == "" {
			return err
		}
		werr := metrics.WriteTextfile(jm.file, metrics.Job{Verb: verb, Start: start, End: time.Now(), Err: err, Values: jm.values})
		if werr != nil && err == nil {
			return werr
		}
		if werr != nil {
			g.log.Warn("metrics not written", "err", flagText(werr))
		}
		return err
	}
}

// addMetricsListen declares --metrics-listen for a long-running verb.
func addMetricsListen(f *pflag.FlagSet, addr *string) {
	f.StringVar(addr, "metrics-listen", "", "serve Prometheus metrics on http://ADDR/metrics, e.g. 127.0.0.1:9104 (default: none)")
}

// listenMetrics serves a registry filled by register on addr until ctx ends; nothing
// without an address.
func listenMetrics(ctx context.Context, g *globals, addr string, register func(*prometheus.Registry)) error {
	if addr == "" {
		return nil
	}
	reg := metrics.NewRegistry()
	register(reg)
	_, err := metrics.Listen(ctx, addr, reg, g.log)
	return err
}
