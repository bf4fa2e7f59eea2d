package main

import (
	"fmt"
	"github.com/ferry-backup/ferry/internal/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"os"
	"strings"

	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/spf13/cobra"
)

func newServeCmd(g *globals) *cobra.Command {
	var cfg clone.ServeConfig
	var sf securityFlags
	var impact float64
	var metricsAddr string
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR (--token-file F | --tls-cert C --tls-key K --tls-ca CA)",
		Short: "Serve hot clones of the local server to ferry clone on other hosts",
		Example: `  ferry serve --listen 0.0.0.0:4444 --token-file /etc/ferry/token
  ferry serve --listen :4444 --tls-cert donor.pem --tls-key donor.key --tls-ca ca.pem --max-impact 20
  Every connection is TLS; the recipient must prove it holds the same token (or a
  certificate signed by --tls-ca) before anything is sent. Only the datadir of the
  server ferry connects to (--socket, --user...) is served.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sec, err := sf.resolve()
			if err != nil {
				return err
			}
			cfg.Security, cfg.Log, cfg.MaxImpact = sec, g.log, impact/100
			cfg.Backup.Log, cfg.Backup.Version = g.log, version
			cfg.Backup.Command = strings.Join(os.Args[1:], " ")
			cfg.Stats = &clone.ServeStats{}
			if err := listenMetrics(cmd.Context(), g, metricsAddr, func(r *prometheus.Registry) { metrics.RegisterServe(r, cfg.Stats) }); err != nil {
				return err
			}
			return clone.Serve(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	addConnFlags(f, &cfg.Backup.Conn)
	sf.add(f, "the donor")
	f.StringVar(&cfg.Listen, "listen", ":4444", "address to listen on")
	f.Var(byteSize{&cfg.MaxRate}, "max-rate", "cap on the bytes each clone sends per second, e.g. 100M (default unlimited)")
	f.Float64Var(&impact, "max-impact", 0, "percent of the server's write throughput a clone may cost: the copy slows down while writes fall further (default: not watched)")
	f.Var(byteSize{&cfg.Memory}, "max-memory", fmt.Sprintf("memory for data not yet acknowledged by the recipient, per clone (default %s)", sizeText(defaults.CloneMemory)))
	addSpoolFlags(f, &cfg.Backup.Spool)
	addRedoArchiveFlag(f, &cfg.Backup.RedoArchive)
	f.IntVar(&cfg.Backup.Parallel, "parallel", defaults.DonorParallel(), "parallel copy workers: one per core (ferry backup's default is 1, which spares a busy server more)")
	addMetricsListen(f, &metricsAddr)
	f.BoolVar(&cfg.Once, "once", false, "serve one clone, then exit with its result")
	f.DurationVar(&cfg.Grace, "reconnect-wait", defaults.CloneGrace, "how long a clone waits for a recipient whose connections broke")
	return cmd
}
