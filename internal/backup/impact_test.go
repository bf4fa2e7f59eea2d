package backup

import (
	"log/slog"
	"math"
	"testing"

	"golang.org/x/time/rate"
)

type fakeLag struct{ lag, capacity uint64 }

func (f *fakeLag) RedoLag() (uint64, uint64, bool) { return f.lag, f.capacity, true }

// TestThrottleRedoGuard: the data copy slows down while the redo copy trails the server
// by most of the log, and gets its speed back once it caught up.
func TestThrottleRedoGuard(t *testing.T) {
	lag := &fakeLag{capacity: 100 << 20}
	th := &throttle{lim: rate.NewLimiter(rate.Inf, throttleBurst), mon: lag, log: slog.New(slog.DiscardHandler), current: math.Inf(1)}
	lag.lag = 80 << 20
	if !th.guardRedo() || th.lim.Limit() != minCopyRate {
		t.Fatalf("80%% of the log unread: limit %v, want %v", th.lim.Limit(), rate.Limit(minCopyRate))
	}
	lag.lag = 10 << 20
	if th.guardRedo() || th.lim.Limit() != rate.Inf {
		t.Fatalf("caught up: limit %v, want unlimited again", th.lim.Limit())
	}
}

// TestThrottleImpact: the copy's limit drops while the donor's writes fall below the
// allowed share of the baseline and climbs back while they do not.
func TestThrottleImpact(t *testing.T) {
	th := &throttle{lim: rate.NewLimiter(rate.Inf, throttleBurst), impact: 0.2, base: 1000, log: slog.New(slog.DiscardHandler), current: math.Inf(1)}
	th.adjust(700) // 30 % fewer writes than without the copy
	first := th.lim.Limit()
	if math.IsInf(float64(first), 1) {
		t.Fatal("writes fell 30% with --max-impact 20 and the copy was not slowed")
	}
	th.adjust(700)
	if th.lim.Limit() >= first {
		t.Fatalf("still too many writes lost, yet the limit went from %v to %v", first, th.lim.Limit())
	}
	low := th.lim.Limit()
	th.adjust(950)
	if th.lim.Limit() <= low {
		t.Fatalf("writes recovered, yet the limit stayed at %v", th.lim.Limit())
	}
}

// TestThrottleIgnoresNoise: per-second write rates that swing ±8 % around 95 % of the
// baseline (a server's own jitter) do not slow a copy allowed 10 %: the smoothed rate
// stays above the floor and the limit climbs from its gentle start.
func TestThrottleIgnoresNoise(t *testing.T) {
	th := &throttle{lim: rate.NewLimiter(rate.Inf, throttleBurst), impact: 0.1, base: 1000, log: slog.New(slog.DiscardHandler), current: gentleStart}
	for i := range 12 {
		w := 950.0 + 80*float64(i%2*2-1) // 870, 1030, 870, ...
		th.adjust(th.smooth(w))
	}
	if float64(th.lim.Limit()) <= gentleStart {
		t.Fatalf("limit %v after 12 s of noisy but sufficient writes; want it above the start %d", th.lim.Limit(), gentleStart)
	}
	high := th.lim.Limit()
	for range 4 {
		th.adjust(th.smooth(700))
	}
	if th.lim.Limit() > high/4 {
		t.Fatalf("writes at 70 %% for 4 s took the limit from %v only to %v", high, th.lim.Limit())
	}
}

// TestThrottleImpactIdleServerClimbs: with no writes to protect (a baseline of 0, an idle
// server), the copy climbs from its gentle start to full speed instead of staying there.
func TestThrottleImpactIdleServerClimbs(t *testing.T) {
	th := &throttle{lim: rate.NewLimiter(gentleStart, throttleBurst), impact: 0.1, log: slog.New(slog.DiscardHandler), current: gentleStart}
	for range 30 {
		th.adjust(0)
	}
	if th.lim.Limit() != rate.Inf {
		t.Fatalf("an idle server's copy is still limited to %v after 30 s", th.lim.Limit())
	}
}
