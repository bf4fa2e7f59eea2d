package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var _ Clock = Real{}
var _ Clock = (*Fake)(nil)

// The fake stands still, moves on Advance and Sleep, and records only the sleeps.
func TestFakeMoves(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	if !f.Now().Equal(t0) || f.Since(t0) != 0 {
		t.Fatalf("a new fake reads %v", f.Now())
	}
	f.Advance(time.Minute)
	if err := f.Sleep(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if f.Since(t0) != time.Minute+time.Second {
		t.Fatalf("elapsed %v, want 1m1s", f.Since(t0))
	}
	if w := f.Waits(); len(w) != 1 || w[0] != time.Second {
		t.Fatalf("waits %v", w)
	}
}

// After's channel fires only once the fake time reaches its deadline.
func TestFakeAfter(t *testing.T) {
	f := NewFake(time.Time{})
	c := f.After(10 * time.Second)
	f.Advance(9 * time.Second)
	select {
	case <-c:
		t.Fatal("fired 1 s early")
	default:
	}
	f.Advance(time.Second)
	select {
	case got := <-c:
		if got != f.Now() {
			t.Fatalf("sent %v, now %v", got, f.Now())
		}
	default:
		t.Fatal("did not fire at its deadline")
	}
	select {
	case <-f.After(0):
	default:
		t.Fatal("After(0) did not fire at once")
	}
}

// A sleep on an ended context returns its cause, on either clock.
func TestSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := (Real{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("real: err %v after %v", err, time.Since(start))
	}
	if err := NewFake(time.Time{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("fake: err %v", err)
	}
	if Or(nil) != (Real{}) {
		t.Fatal("Or(nil) is not the wall clock")
	}
}
