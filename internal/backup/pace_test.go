package backup

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/clock"
	"golang.org/x/time/rate"
)

// simServer is a server and a disk shared with the copy, on a fake clock: the server
// writes base redo bytes/s while the copy is paused, and loses hurt of them at the copy's
// full speed (disk bytes/s), in proportion to the copy's rate. Each Writes call moves
// the world on to the fake clock's time, counting the copy's bytes too.
type simServer struct {
	clk    *clock.Fake
	lim    *rate.Limiter
	copied *atomic.Int64
	disk   float64
	base   float64
	hurt   float64
	at     time.Time
	rows   float64
	reads  int
	stop   int // cancel after this many reads
	cancel context.CancelFunc
	// kept sums the server's writes and what it would have written without the copy,
	// from the read keepFrom on.
	keepFrom        int
	wrote, couldHad float64
	slowest         float64 // the copy's lowest rate while it ran
}

func (s *simServer) copyRate() float64 {
	if s.lim == nil { // before the copy
		return 0
	}
	return math.Min(float64(s.lim.Limit()), s.disk)
}

func (s *simServer) Writes(context.Context) (int64, error) { return 0, nil }

func (s *simServer) RedoBytes(context.Context) (uint64, error) {
	now := s.clk.Now()
	secs := now.Sub(s.at).Seconds()
	s.at = now
	c := s.copyRate()
	if s.lim != nil && (s.slowest == 0 || c < s.slowest) {
		s.slowest = c
	}
	w := s.base * (1 - s.hurt*c/s.disk) * secs
	s.rows += w
	if s.copied != nil {
		s.copied.Add(int64(c * secs))
	}
	if s.reads >= s.keepFrom {
		s.wrote += w
		s.couldHad += s.base * secs
	}
	s.reads++
	if s.stop > 0 && s.reads >= s.stop {
		s.cancel()
	}
	return uint64(s.rows), nil
}

func (s *simServer) Close() error { return nil }

const simDisk = 200 << 20

// newSim is a pacer over a simulated server writing base redo bytes/s, a hurt share of
// which the full-speed copy costs; the run stops after ticks samples. The copy starts
// once the test sets s.lim, after the baseline.
func newSim(base, hurt float64, ticks int) (context.Context, *pacer, *simServer) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := clock.NewFake(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	lim := rate.NewLimiter(rate.Inf, throttleBurst)
	var copied atomic.Int64
	s := &simServer{clk: clk, copied: &copied, disk: simDisk, base: base, hurt: hurt, at: clk.Now(), cancel: cancel, stop: ticks + 3}
	p := &pacer{srv: s, clk: clk, lim: lim, copied: &copied, log: slog.New(slog.DiscardHandler), limit: math.Inf(1), t0: clk.Now()}
	return ctx, p, s
}

// TestPaceIdleServerFullSpeed: a server that writes nothing has nothing to lose: the
// pace watches it for paceIdleProbe only, never pauses or slows the copy.
func TestPaceIdleServerFullSpeed(t *testing.T) {
	ctx, p, s := newSim(0, 0.7, 20)
	if p.baseline(ctx) {
		t.Fatal("an idle server was taken for a writing one")
	}
	if w := s.clk.Waits(); len(w) != 1 || w[0] != paceIdleProbe {
		t.Fatalf("waits before the copy %v, want one of %v", w, paceIdleProbe)
	}
	if p.lim.Limit() != rate.Inf {
		t.Fatalf("idle server: copy limited to %v", p.lim.Limit())
	}
}

// TestPaceBaselineOverlapsPreparation: the time the job spends preparing the copy
// after watchPace counts toward the baseline: a copy prepared for longer than the idle
// probe starts without any wait.
func TestPaceBaselineOverlapsPreparation(t *testing.T) {
	ctx, p, s := newSim(0, 0.7, 20)
	s.clk.Advance(time.Second)
	if p.baseline(ctx) {
		t.Fatal("an idle server was taken for a writing one")
	}
	if w := s.clk.Waits(); len(w) != 0 {
		t.Fatalf("waited %v before the copy, after 1 s of preparation", w)
	}
}

// TestPaceUnhurtServerFullSpeed: a writing server whose writes the copy does not dent
// keeps the copy at full speed all along.
func TestPaceUnhurtServerFullSpeed(t *testing.T) {
	ctx, p, s := newSim(5e6, 0.05, 40)
	if !p.baseline(ctx) {
		t.Fatal("a server writing 5 MB/s of redo was taken for idle")
	}
	if math.Abs(p.ref-5e6) > 1 {
		t.Fatalf("baseline %v bytes/s, want 5e6", p.ref)
	}
	s.lim = p.lim
	p.run(ctx)
	if p.lim.Limit() != rate.Inf || !math.IsInf(p.limit, 1) {
		t.Fatalf("writes held at 95%%, yet the copy was limited to %v", p.lim.Limit())
	}
}

// TestPaceBacksOffAndRecovers: a copy that costs the server 70 % of its writes at full
// speed backs off, never below two thirds of its full speed (the copy takes at most
// 1.5x as long), so the server keeps more than the 30 % it would; it goes back to full speed once the copy no longer hurts (the load
// moved off the disk).
func TestPaceBacksOffAndRecovers(t *testing.T) {
	ctx, p, s := newSim(5e6, 0.7, 60)
	s.keepFrom = 20 // after the first 10 s, once it has settled
	if !p.baseline(ctx) {
		t.Fatal("taken for idle")
	}
	s.lim = p.lim
	p.run(ctx)
	if math.IsInf(p.limit, 1) {
		t.Fatal("writes at 30 % of the baseline and the copy was not slowed")
	}
	if kept := s.wrote / s.couldHad; kept < 0.45 {
		t.Fatalf("the server kept %.0f%% of its writes once paced; want at least 45%% (30%% unpaced)", kept*100)
	}
	if s.slowest < paceMinShare*simDisk*0.99 {
		t.Fatalf("paced the copy down to %.0f bytes/s, below two thirds of its full speed", s.slowest)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.hurt, s.reads, s.stop, s.cancel = 0, 0, 30, cancel
	p.run(ctx)
	if p.lim.Limit() != rate.Inf {
		t.Fatalf("the copy no longer hurts, yet it stays limited to %v", p.lim.Limit())
	}
}

// TestPaceLoadDrops: when the load itself falls for good, the reference comes down with
// it and the copy returns to full speed instead of crawling for the rest of the backup.
func TestPaceLoadDrops(t *testing.T) {
	ctx, p, s := newSim(5e6, 0.05, 10)
	if !p.baseline(ctx) {
		t.Fatal("taken for idle")
	}
	s.lim = p.lim
	p.run(ctx)
	ctx, cancel := context.WithCancel(context.Background())
	s.base, s.reads, s.stop, s.cancel = 2e6, 0, 300, cancel
	p.run(ctx)
	if p.lim.Limit() != rate.Inf {
		t.Fatalf("150 s after the load fell to 40%%, the copy is still limited to %v", p.lim.Limit())
	}
}

// TestPaceSmallCopyUnpaced: a copy too small for the pace to act on is not paced, and
// its counter connection is closed at once.
func TestPaceSmallCopyUnpaced(t *testing.T) {
	_, p, _ := newSim(5e6, 0.7, 10)
	small := plan{InnoDB: []srcFile{{Size: 10 << 20}}}
	if p.worth(small) != nil {
		t.Fatal("a 10 MiB copy is paced")
	}
	_, p, _ = newSim(5e6, 0.7, 10)
	if p.worth(plan{InnoDB: []srcFile{{Size: paceMinCopy}}}) != p {
		t.Fatal("a copy of paceMinCopy bytes is not paced")
	}
	var none *pacer
	if none.worth(small) != nil {
		t.Fatal("no pace became one")
	}
}
