// Package clock is ferry's one clock seam: the time the program reads and waits on.
// Code that must be tested without waiting takes a Clock (Real in production) instead
// of calling time.Now, time.Since, time.After or time.Sleep; tests pass a *Fake and
// move it. Waits that only pace real I/O may stay on the time package.
package clock

import (
	"context"
	"time"
)

// Clock is the time a piece of ferry reads and waits on.
type Clock interface {
	Now() time.Time
	// Since is the time elapsed since t.
	Since(t time.Time) time.Duration
	// After sends the time once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
	// Sleep waits d, or until ctx ends (then it returns ctx's cause).
	Sleep(ctx context.Context, d time.Duration) error
}

// Real is the wall clock.
type Real struct{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// Since implements Clock.
func (Real) Since(t time.Time) time.Duration { return time.Since(t) }

// After implements Clock.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Sleep implements Clock.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Or is c, or the wall clock when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
