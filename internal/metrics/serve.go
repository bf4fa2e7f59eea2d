package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ferry-backup/ferry/internal/archiver"
	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Listen serves reg on http://addr/metrics until ctx ends. The listener is opened
// before it returns, so a taken address is an error at once; the server runs in the
// background.
func Listen(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, setting.Errorf("%s %s: %w", setting.MetricsListen, addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics endpoint stopped", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { srv.Close() })
	log.Info("metrics on /metrics", "listen", ln.Addr().String())
	return ln.Addr(), nil
}

// NewRegistry is a registry with the Go runtime's and the process's own metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// RegisterArchiver exports a running binlog archiver's counters.
func RegisterArchiver(reg *prometheus.Registry, s *archiver.Stats) {
	p := "ferry_binlog_archive_"
	reg.MustRegister(
		counter(p+"stored_bytes_total", "Binlog bytes stored in the archive by this process.", s.StoredBytes.Load),
		counter(p+"segments_total", "Segments stored by this process.", s.Segments.Load),
		counter(p+"reconnects_total", "Connections to the server lost and made again.", s.Reconnects.Load),
		counter(p+"gaps_total", "Gaps recorded: binlog the server purged before it was archived.", s.Gaps.Load),
		gauge(p+"connected", "1 while the archiver follows the server's binlog.", func() int64 { return b2i(s.Connected.Load()) }),
		gauge(p+"last_store_timestamp_seconds", "When a segment was last stored (Unix time).", s.LastStored.Load),
		gauge(p+"last_event_timestamp_seconds", "The server's timestamp of the newest event stored (Unix time).", s.LastEventTime.Load),
	)
}

// RegisterServe exports a clone donor's counters.
func RegisterServe(reg *prometheus.Registry, s *clone.ServeStats) {
	p := "ferry_serve_"
	reg.MustRegister(
		counter(p+"clones_started_total", "Clones that began to copy.", s.Started.Load),
		counter(p+"clones_succeeded_total", "Clones the recipient received whole.", s.Succeeded.Load),
		counter(p+"clones_failed_total", "Clones that failed.", s.Failed.Load),
		counter(p+"sent_bytes_total", "Bytes on the wire of the clones that ended.", s.BytesSent.Load),
		gauge(p+"clones_active", "Clones copying now.", s.Active.Load),
		gauge(p+"last_success_timestamp_seconds", "When a clone last completed (Unix time).", s.LastSuccess.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: p + "last_duration_seconds", Help: "How long the last successful clone took."},
			func() float64 { return float64(s.LastDuration.Load()) / 1000 }),
	)
}

func counter(name, help string, f func() int64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
}

func gauge(name, help string, f func() int64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
