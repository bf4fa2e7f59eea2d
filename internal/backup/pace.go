package backup

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/clock"
	"golang.org/x/time/rate"
)

// The default pace of the data copy (Config.Unpaced turns it off). Its signal is the
// server's redo bytes per second (Innodb_lsn_current), which every write adds to and
// which stands still on an idle server. The copy runs at full speed while the server
// writes as it did just before the copy started; it backs off multiplicatively while the
// writes fall below paceKeep of that, and climbs back while they hold. An idle server
// (no redo before the copy) has nothing to lose: its copy is never slowed or paused.
const (
	paceIdleProbe = 300 * time.Millisecond // how long the server is watched before the copy...
	paceBaseline  = time.Second            // ...and how long once it turns out to be writing
	paceIdle      = 16 << 10               // redo bytes/s below which a server is idle
	paceTick      = 500 * time.Millisecond
	paceMinCopy   = 256 << 20 // bytes below which a copy is over before a pace could act
	paceKeep      = 0.75      // share of the baseline writes the copy must leave the server
	paceDown      = 0.6       // the copy's rate is cut to this share while the writes are below paceKeep
	paceUp        = 1.2       // ...and raised by this factor each tick while they hold
	paceFloor     = 4 << 20   // bytes/s the paced copy never goes below...
	// paceMinShare: ...nor below this share of its full speed, which bounds how much
	// longer the copy takes: on a disk shared with the server, the writes a slow copy
	// costs per byte copied grow as it slows (bench/README.md), so a crawl loses more
	// transactions in all than a short full-speed copy.
	paceMinShare = 2.0 / 3
	// paceWarm: ticks at the start of the copy at full speed whatever the writes do,
	// to learn the copy's full speed (its first half second is still starting up).
	paceWarm   = 2
	paceSmooth = 0.5  // weight of the newest sample in the moving average
	paceDecay  = 0.01 // share the reference yields per tick while the writes fall short
)

// pacer adapts the data copy's rate to the server's write rate (the default pace).
type pacer struct {
	srv    WriteCounter
	clk    clock.Clock
	lim    *rate.Limiter
	copied *atomic.Int64 // bytes the data copy has read
	log    *slog.Logger
	ref    float64 // redo bytes/s the server is held to: the baseline, raised by any better smoothed rate
	avg    float64 // redo bytes/s with the copy running, smoothed
	limit  float64 // the copy's limit in bytes/s, +Inf at full speed
	top    float64 // the fastest copy rate seen, bytes/s
	last   uint64  // the last LSN read
	ticks  int     // samples taken
	w0     uint64  // the LSN when the baseline began, at t0
	t0     time.Time
	// running: start took over the counter connection (run or start closes it)
	running bool
}

// watchPace starts watching the server for the default pace, when cfg asks for it (no
// other pace, not Unpaced): the baseline runs while the job prepares, and start ends
// it. Without a counter connection the copy runs at full speed; nil means unpaced.
func watchPace(ctx context.Context, cfg Config, log *slog.Logger) *pacer {
	if cfg.Unpaced || cfg.MaxRate > 0 || cfg.MaxImpact > 0 || cfg.WatchRedo {
		return nil
	}
	srv, err := cfg.Server.Counters(ctx)
	if err != nil {
		log.Warn("cannot watch the server's writes; the copy runs at full speed", "err", err)
		return nil
	}
	p := &pacer{srv: srv, clk: clock.Or(cfg.Clock), lim: rate.NewLimiter(rate.Inf, throttleBurst), log: log, limit: math.Inf(1)}
	p.w0, p.t0 = p.redo(ctx), p.clk.Now()
	return p
}

// start ends the baseline (waiting for what is left of it) and returns the data copy's
// limiter, paced until ctx ends if the server is writing; copied counts the bytes the
// copy reads.
func (p *pacer) start(ctx context.Context, copied *atomic.Int64) *rate.Limiter {
	p.copied, p.running = copied, true
	if !p.baseline(ctx) {
		_ = p.srv.Close()
		return p.lim
	}
	go p.run(ctx)
	return p.lim
}

// worth keeps the pace for a copy of pl, or releases it and returns nil when the copy
// is too small for a pace to act on (it ends within its first second).
func (p *pacer) worth(pl plan) *pacer {
	if p == nil {
		return nil
	}
	var n int64
	for _, fs := range [][]srcFile{pl.InnoDB, pl.DDLStable, pl.Commit, pl.AriaControl, pl.AriaLogs} {
		for _, f := range fs {
			n += f.Size
		}
	}
	if n >= paceMinCopy {
		return p
	}
	p.release()
	p.running = true // released
	return nil
}

// release closes the counter connection of a pace that never started (nil: none).
func (p *pacer) release() {
	if p != nil && !p.running {
		_ = p.srv.Close()
	}
}

// baseline measures the server's writes before the copy, since watchPace; it reports
// whether the server is writing at all (an idle server is not watched further).
func (p *pacer) baseline(ctx context.Context) bool {
	if p.sleepUntil(ctx, paceIdleProbe) != nil {
		return false
	}
	if p.rate(ctx, p.w0, p.t0) < paceIdle {
		p.log.Debug("pace: the server is idle; the copy runs at full speed")
		return false
	}
	if p.sleepUntil(ctx, paceBaseline) != nil {
		return false
	}
	p.ref = p.rate(ctx, p.w0, p.t0)
	p.log.Debug("pace: baseline", "redo_kib_per_s", int64(p.ref)>>10)
	return true
}

// sleepUntil waits until d after the baseline began.
func (p *pacer) sleepUntil(ctx context.Context, d time.Duration) error {
	if left := d - p.clk.Since(p.t0); left > 0 {
		return p.clk.Sleep(ctx, left)
	}
	return ctx.Err()
}

// run samples the server's writes and the copy's rate every paceTick until ctx ends.
func (p *pacer) run(ctx context.Context) {
	defer p.srv.Close()
	w, b, at := p.redo(ctx), p.copied.Load(), p.clk.Now()
	for p.clk.Sleep(ctx, paceTick) == nil {
		secs := p.clk.Since(at).Seconds()
		if secs <= 0 {
			continue
		}
		w1, b1 := p.redo(ctx), p.copied.Load()
		p.step(float64(w1-w)/secs, float64(b1-b)/secs)
		w, b, at = w1, b1, p.clk.Now()
	}
}

// step moves the copy's limit by one sample: the server's redo bytes/s and the copy's
// bytes/s over the last tick.
func (p *pacer) step(writes, copyRate float64) {
	if p.avg == 0 {
		p.avg = writes
	} else {
		p.avg += paceSmooth * (writes - p.avg)
	}
	p.top = math.Max(p.top, copyRate)
	p.rebase()
	was := p.limit
	p.ticks++
	if p.ticks <= paceWarm {
		return
	}
	if p.avg < paceKeep*p.ref {
		p.backOff(copyRate)
	} else {
		p.recover()
	}
	if p.limit != was {
		p.log.Debug("pace", "redo_kib_per_s", int64(p.avg)>>10, "reference_kib_per_s", int64(p.ref)>>10, "copy_per_s", formatRate(int64(copyRate)), "limit", p.limitText())
	}
	p.apply()
}

// rebase moves the reference: up to any better smoothed rate, and down by paceDecay a
// tick while the writes fall short of it (the load itself may have fallen; no pause
// tells, so the reference yields slowly).
func (p *pacer) rebase() {
	if p.avg < paceKeep*p.ref {
		p.ref *= 1 - paceDecay
	}
	p.ref = math.Max(p.avg, p.ref)
}

// backOff cuts the limit below what the copy was doing.
func (p *pacer) backOff(copyRate float64) {
	from := p.limit
	if math.IsInf(from, 1) || copyRate > 0 && copyRate < from {
		from = copyRate
	}
	if from <= 0 {
		from = paceFloor / paceDown
	}
	p.limit = math.Max(from*paceDown, p.floorRate())
}

// floorRate is the lowest limit: paceMinShare of the fastest rate seen, at least paceFloor.
func (p *pacer) floorRate() float64 {
	return math.Max(paceMinShare*p.top, paceFloor)
}

// recover raises a limit, back to full speed once it is above the fastest rate seen.
func (p *pacer) recover() {
	if math.IsInf(p.limit, 1) {
		return
	}
	p.limit *= paceUp
	if p.limit > p.top {
		p.limit = math.Inf(1)
	}
}

func (p *pacer) apply() { setLimit(p.lim, p.limit) }

func (p *pacer) limitText() string { return limitText(p.limit) }

// rate is the server's redo bytes per second since w0 was read at t0.
func (p *pacer) rate(ctx context.Context, w0 uint64, t0 time.Time) float64 {
	secs := p.clk.Since(t0).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(p.redo(ctx)-w0) / secs
}

// redo is the server's redo bytes (its LSN); a failed read repeats the last one.
func (p *pacer) redo(ctx context.Context) uint64 {
	if n, err := p.srv.RedoBytes(ctx); err == nil && n >= p.last {
		p.last = n
	}
	return p.last
}
