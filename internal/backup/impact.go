package backup

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"time"

	"golang.org/x/time/rate"
)

// Throttle settings (--max-impact). The copy rate follows the server's write
// throughput: it is cut when the writes fall below (1 - impact) of what they are while
// the copy pauses, and raised again while they keep up. Short pauses re-measure that
// baseline, since the load itself changes during a long copy.
const (
	throttleTick   = time.Second
	probeEvery     = 30 * time.Second // a baseline measurement this often...
	probeFor       = 2 * time.Second  // ...with the copy paused this long
	minCopyRate    = 1 << 20          // bytes/s the copy never goes below
	throttleBurst  = 1 << 20
	redoBackoff    = 0.75 // share of the redo log unread by the copier at which the copy backs off
	redoHopeless   = 0.9  // ...and at which the user is told it may not be enough
	throttleDown   = 0.6
	throttleUp     = 1.25
	pausedCopyRate = 64 << 10
	// gentleStart is where a copy watching the server's writes starts after its first
	// baseline: it climbs while the writes hold up, rather than starting at full speed
	// and backing off only after the server has paid for it.
	gentleStart = 16 << 20
	smoothing   = 0.35
)

// redoLagger reports how far the redo copy trails the server (Monitor).
type redoLagger interface {
	RedoLag() (lag, capacity uint64, ok bool)
}

// throttle adapts the rate of the data copy of one backup or clone.
type throttle struct {
	srv     WriteCounter
	lim     *rate.Limiter
	impact  float64
	mon     redoLagger
	log     *slog.Logger
	base    float64 // server writes/s measured while the copy paused
	avg     float64 // writes/s with the copy running, smoothed over a few seconds
	current float64 // the copy's limit in bytes/s, +Inf when unthrottled
	warned  bool
	backing bool // the copy is slowed for the redo copy
}

// startThrottle returns the limiter of the data copy and adapts it until ctx ends: to
// the server's writes when impact > 0, and always to the redo copy's lag. It needs its
// own connection to read the server's counters; without one the copy runs unthrottled.
func startThrottle(ctx context.Context, cfg Config, impact float64, mon *Monitor, log *slog.Logger) *rate.Limiter {
	lim := rate.NewLimiter(rate.Inf, throttleBurst)
	srv, err := cfg.Server.Counters(ctx)
	if err != nil {
		log.Warn("impact limit: cannot watch the server's writes; the copy is not throttled", "err", err)
		return lim
	}
	t := &throttle{srv: srv, lim: lim, impact: impact, mon: mon, log: log, current: math.Inf(1)}
	go t.run(ctx)
	return lim
}

func (t *throttle) run(ctx context.Context) {
	defer t.srv.Close()
	if t.impact > 0 {
		t.current = gentleStart
		t.probe(ctx)
	}
	last, lastAt := t.writes(ctx), time.Now()
	nextProbe := time.Now().Add(probeEvery)
	tick := time.NewTicker(throttleTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if t.guardRedo() || t.impact <= 0 {
			continue
		}
		if time.Now().After(nextProbe) {
			t.probe(ctx)
			t.avg = 0
			last, lastAt, nextProbe = t.writes(ctx), time.Now(), time.Now().Add(probeEvery)
			continue
		}
		w := t.writes(ctx)
		rateNow := float64(w-last) / time.Since(lastAt).Seconds()
		last, lastAt = w, time.Now()
		t.adjust(t.smooth(rateNow))
	}
}

// probe pauses the copy to measure the server's write rate without it.
func (t *throttle) probe(ctx context.Context) {
	t.lim.SetLimit(pausedCopyRate)
	time.Sleep(probeFor / 4) // let reads in flight drain
	w0, at := t.writes(ctx), time.Now()
	select {
	case <-ctx.Done():
		return
	case <-time.After(probeFor):
	}
	t.base = float64(t.writes(ctx)-w0) / time.Since(at).Seconds()
	t.apply()
	t.log.Debug("impact limit baseline", "writes_per_s", int64(t.base), "copy_limit", t.limitText())
}

// smooth averages the per-second write rates (an exponential moving average over about
// three seconds): a single second's rate varies by several percent on its own, which
// would cross a 10 % floor and slow the copy for nothing.
func (t *throttle) smooth(rate float64) float64 {
	if t.avg == 0 {
		t.avg = rate
	} else {
		t.avg += smoothing * (rate - t.avg)
	}
	return t.avg
}

// adjust moves the copy's limit by how the writes compare with the baseline.
func (t *throttle) adjust(writes float64) {
	floor := (1 - t.impact) * t.base
	switch {
	case t.base > 0 && writes < floor:
		if math.IsInf(t.current, 1) {
			t.current = 200 << 20
		}
		t.current = math.Max(t.current*throttleDown, minCopyRate)
	case !math.IsInf(t.current, 1):
		t.current *= throttleUp
		if t.current > 2<<30 {
			t.current = math.Inf(1)
		}
	}
	t.apply()
}

// guardRedo slows the copy when the server's redo log is about to lap the redo copy,
// so the tailer gets the disk and CPU; it reports whether it did.
func (t *throttle) guardRedo() bool {
	lag, capacity, ok := t.mon.RedoLag()
	if !ok || capacity == 0 {
		return false
	}
	share := float64(lag) / float64(capacity)
	if share < redoBackoff {
		if t.backing {
			t.backing = false
			t.apply()
			t.log.Info("the redo copy caught up; the data copy resumes", "redo_unread_pct", int(share*100), "copy_limit", t.limitText())
		}
		return false
	}
	if !t.backing {
		t.log.Info("slowing the data copy: the server's redo log is filling up ahead of the redo copy", "redo_unread_pct", int(share*100))
	}
	t.backing = true
	t.lim.SetLimit(minCopyRate)
	if share >= redoHopeless && !t.warned {
		t.warned = true
		t.log.Warn("the server writes redo faster than the copy can keep up even with the data copy slowed down: the copy fails if the redo log laps it; raise innodb_log_file_size or copy at a quieter time",
			"redo_unread_pct", int(share*100))
	}
	return true
}

func (t *throttle) apply() { setLimit(t.lim, t.current) }

func (t *throttle) limitText() string { return limitText(t.current) }

// setLimit sets lim to bytes/s, +Inf for no limit (the throttle's and the pace's).
func setLimit(lim *rate.Limiter, bytes float64) {
	if math.IsInf(bytes, 1) {
		lim.SetLimit(rate.Inf)
		return
	}
	lim.SetLimit(rate.Limit(bytes))
}

// limitText prints a copy limit in bytes/s for people ("none" for +Inf).
func limitText(bytes float64) string {
	if math.IsInf(bytes, 1) {
		return "none"
	}
	return formatRate(int64(bytes))
}

// writes is the server's count of rows written by InnoDB.
func (t *throttle) writes(ctx context.Context) int64 {
	n, _ := t.srv.Writes(ctx) // a failed read counts 0, as a pause does
	return n
}

// formatRate prints bytes/s for people.
func formatRate(b int64) string {
	const mib = 1 << 20
	return strconv.FormatInt(b/mib, 10) + " MiB/s"
}
