package backoff

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock for tests: Sleep returns at once (or with ctx's cause when ctx has
// ended), moving the fake time on by the wait and recording it.
type Fake struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
	// OnSleep, if set, is called with each wait before Sleep returns (a test cancels
	// its context there, say).
	OnSleep func(d time.Duration)
}

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Sleep implements Clock.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.waits = append(f.waits, d)
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
}

// Waits returns the waits slept so far.
func (f *Fake) Waits() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}
