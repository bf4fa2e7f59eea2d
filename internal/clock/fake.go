package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock for tests. Its time stands still until the test moves it (Advance,
// Set) or something sleeps on it: Sleep returns at once, moving the time on by the
// wait and recording it. After's channels fire when the time reaches their deadline.
// It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	waits  []time.Duration
	timers []timer
	// OnSleep, if set, is called with each wait before Sleep returns (a test cancels
	// its context there, say).
	OnSleep func(d time.Duration)
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// NewFake returns a fake clock that reads t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since implements Clock.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// After implements Clock: the channel fires once the fake time reaches now+d (at once
// if d <= 0).
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan time.Time, 1)
	f.timers = append(f.timers, timer{at: f.now.Add(d), c: c})
	f.fireLocked()
	return c
}

// Sleep implements Clock.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.waits = append(f.waits, d)
	f.fireLocked()
	hook := f.OnSleep
	f.mu.Unlock()
	if hook != nil {
		hook(d)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// Advance moves the fake time on by d without a wait being recorded.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fireLocked()
}

// Set moves the fake time to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
	f.fireLocked()
}

// Waits returns the waits slept so far.
func (f *Fake) Waits() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

// fireLocked sends on the channels of the timers that are due and drops them.
func (f *Fake) fireLocked() {
	kept := f.timers[:0]
	for _, t := range f.timers {
		if t.at.After(f.now) {
			kept = append(kept, t)
			continue
		}
		t.c <- f.now
	}
	f.timers = kept
}
