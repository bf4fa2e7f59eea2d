package backoff

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

var errFlaky = errors.New("connection reset")

// Without jitter the waits double from Initial and stop growing at Max.
func TestWaitsGrowAndCap(t *testing.T) {
	b := New(Policy{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: -1, Clock: &Fake{}})
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, w := range want {
		d, ok := b.Next()
		if !ok || d != w*time.Millisecond {
			t.Fatalf("wait %d: %v %v, want %v", i, d, ok, w*time.Millisecond)
		}
	}
	b.Reset()
	if d, _ := b.Next(); d != 100*time.Millisecond {
		t.Fatalf("after Reset the wait is %v, want the first again", d)
	}
}

// Jitter takes at most its share off each step, never adds, and does vary.
func TestJitterBounded(t *testing.T) {
	b := New(Policy{Initial: time.Second, Max: 8 * time.Second, Jitter: 0.5, Clock: &Fake{}})
	seen := map[time.Duration]bool{}
	for i := range 200 {
		step := min(time.Second<<min(i, 3), 8*time.Second)
		d, _ := b.Next()
		if d < step/2 || d > step {
			t.Fatalf("wait %d is %v, want within [%v, %v]", i, d, step/2, step)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct waits in 200: no jitter?", len(seen))
	}
}

func TestAttemptsAndElapsedBound(t *testing.T) {
	b := New(Policy{Attempts: 3, Clock: &Fake{}})
	for i := range 2 {
		if _, ok := b.Next(); !ok {
			t.Fatalf("stopped after %d failures, want 2 retries", i+1)
		}
	}
	if _, ok := b.Next(); ok {
		t.Fatal("a fourth attempt allowed with Attempts 3")
	}
	clk := &Fake{}
	b = New(Policy{MaxElapsed: time.Minute, Clock: clk})
	if _, ok := b.Next(); !ok {
		t.Fatal("stopped before any time passed")
	}
	clk.Advance(time.Minute)
	if _, ok := b.Next(); ok {
		t.Fatal("a retry started after MaxElapsed")
	}
}

// Retry sleeps on the clock between transient failures and reports each retry.
func TestRetryTransient(t *testing.T) {
	clk := &Fake{}
	calls := 0
	var seen []Attempt
	err := Retry(context.Background(), Policy{Initial: time.Second, Jitter: -1, Clock: clk}, func(context.Context) error {
		calls++
		if calls < 4 {
			return errFlaky
		}
		return nil
	}, nil, func(a Attempt) { seen = append(seen, a) })
	if err != nil || calls != 4 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	if got := fmt.Sprint(clk.Waits()); got != "[1s 2s 4s]" {
		t.Fatalf("waits %s", got)
	}
	if len(seen) != 3 || seen[2].N != 3 || seen[2].Wait != 4*time.Second || !errors.Is(seen[2].Err, errFlaky) {
		t.Fatalf("notified %+v", seen)
	}
}

func TestRetryPermanentNotRetried(t *testing.T) {
	clk := &Fake{}
	calls := 0
	denied := errors.New("access denied")
	err := Retry(context.Background(), Policy{Clock: clk}, func(context.Context) error {
		calls++
		return fmt.Errorf("connect: %w", Permanent(denied))
	}, nil, nil)
	if calls != 1 || !errors.Is(err, denied) || !IsPermanent(err) || len(clk.Waits()) != 0 {
		t.Fatalf("err %v after %d calls and %d waits", err, calls, len(clk.Waits()))
	}
	calls = 0
	err = Retry(context.Background(), Policy{Clock: clk}, func(context.Context) error { calls++; return denied },
		func(err error) bool { return !errors.Is(err, denied) }, nil)
	if calls != 1 || err != denied {
		t.Fatalf("retryable=false: err %v after %d calls", err, calls)
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
}

func TestRetryStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := &Fake{OnSleep: func(time.Duration) { cancel() }}
	calls := 0
	err := Retry(ctx, Policy{Clock: clk}, func(context.Context) error { calls++; return errFlaky }, nil, nil)
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

func TestRetryGivesLastErrorWhenSpent(t *testing.T) {
	err := Retry(context.Background(), Policy{Attempts: 2, Clock: &Fake{}}, func(context.Context) error { return errFlaky }, nil, nil)
	if err != errFlaky {
		t.Fatalf("err %v", err)
	}
}

// The real clock's Sleep ends with the context.
func TestRealSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := (Real{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

// A retry cut short by its context says what the last attempt met.
func TestRetryEndedSaysLastError(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	clk := &Fake{OnSleep: func(time.Duration) { cancel(errors.New("no reconnection within 1m")) }}
	err := Retry(ctx, Policy{Clock: clk}, func(context.Context) error { return errFlaky }, nil, nil)
	if err == nil || err.Error() != "no reconnection within 1m (the last attempt: connection reset)" {
		t.Fatalf("err %v", err)
	}
}
