// Package backoff is ferry's one retry policy: exponential waits with jitter, capped,
// bounded by attempts or elapsed time, stopped by a context, and never spent on an
// error marked permanent. Its clock is the program's one seam (internal/clock), so
// tests run without sleeping.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ferry-backup/ferry/internal/clock"
)

// Clock is the time a Backoff reads and sleeps on: the program's one clock.
type Clock = clock.Clock

// Real is the wall clock.
type Real = clock.Real

// Policy says how long to wait between attempts and when to stop. Its zero value
// waits 250 ms, doubling up to 30 s, jittered by half, with no limit.
type Policy struct {
	Initial    time.Duration // the first wait; default 250 ms
	Max        time.Duration // the longest wait; default 30 s
	Multiplier float64       // growth per attempt; default 2
	// Jitter is the share of each wait that is random, in [0, 1]: a wait of d lies in
	// [d*(1-Jitter), d]. Default 0.5; negative means none.
	Jitter float64
	// Attempts bounds the tries, the first included; 0 means no bound.
	Attempts int
	// MaxElapsed bounds the time since the first try after which no retry starts;
	// 0 means no bound.
	MaxElapsed time.Duration
	Clock      Clock // default Real
}

func (p Policy) withDefaults() Policy {
	if p.Initial <= 0 {
		p.Initial = 250 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	p.Max = max(p.Max, p.Initial)
	if p.Multiplier < 1 {
		p.Multiplier = 2
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = 0.5
	case p.Jitter < 0:
		p.Jitter = 0
	case p.Jitter > 1:
		p.Jitter = 1
	}
	if p.Clock == nil {
		p.Clock = Real{}
	}
	return p
}

// Backoff is one run of retries under a Policy. It is not safe for concurrent use.
type Backoff struct {
	p     Policy
	start time.Time
	tries int           // attempts made so far (failures counted by Next)
	step  time.Duration // the next wait before jitter
}

// New starts a Backoff: its elapsed time counts from now.
func New(p Policy) *Backoff {
	b := &Backoff{p: p.withDefaults()}
	b.Reset()
	return b
}

// Reset starts over, as after a success: the next wait is the first again, and
// attempts and elapsed time count from now.
func (b *Backoff) Reset() {
	b.start, b.tries, b.step = b.p.Clock.Now(), 0, b.p.Initial
}

// Attempt is the number of failed attempts so far.
func (b *Backoff) Attempt() int { return b.tries }

// Next records a failed attempt and returns the wait before the next one, or false
// when the policy's attempts or elapsed time are spent.
func (b *Backoff) Next() (time.Duration, bool) {
	b.tries++
	if b.p.Attempts > 0 && b.tries >= b.p.Attempts {
		return 0, false
	}
	if b.p.MaxElapsed > 0 && b.p.Clock.Now().Sub(b.start) >= b.p.MaxElapsed {
		return 0, false
	}
	d := b.step
	if next := time.Duration(float64(b.step) * b.p.Multiplier); next > b.step && next < b.p.Max {
		b.step = next
	} else {
		b.step = b.p.Max
	}
	if j := time.Duration(float64(d) * b.p.Jitter); j > 0 {
		d -= rand.N(j + 1)
	}
	return d, true
}

// Sleep waits d on the policy's clock, or until ctx ends.
func (b *Backoff) Sleep(ctx context.Context, d time.Duration) error {
	return b.p.Clock.Sleep(ctx, d)
}

// permanent marks an error that retrying cannot mend.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// ErrPermanent matches (errors.Is) every error marked by Permanent.
var ErrPermanent = errors.New("permanent error")

func (p permanent) Is(target error) bool { return target == ErrPermanent }

// Permanent marks err as one no retry can mend (bad credentials, a missing grant,
// another server behind the address): Retry returns it at once. Nil stays nil.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return permanent{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by Permanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// Attempt describes a failed attempt about to be retried.
type Attempt struct {
	N    int           // the failed attempt's number, from 1
	Wait time.Duration // the wait before the next
	Err  error         // why it failed
}

// Retry runs op until it succeeds, returns a permanent error, retryable says its error
// is not worth retrying, the policy is spent (the last error is returned), or ctx ends
// (ctx's cause is returned, with the last attempt's error). notify, if set, is told of
// each retry before its wait; a nil retryable retries every error not marked permanent.
func Retry(ctx context.Context, p Policy, op func(context.Context) error, retryable func(error) bool, notify func(Attempt)) error {
	b := New(p)
	for {
		err := op(ctx)
		if err == nil || IsPermanent(err) || (retryable != nil && !retryable(err)) {
			return err
		}
		if ctx.Err() != nil {
			return ended(ctx, err)
		}
		d, ok := b.Next()
		if !ok {
			return err
		}
		if notify != nil {
			notify(Attempt{N: b.Attempt(), Wait: d, Err: err})
		}
		if b.Sleep(ctx, d) != nil {
			return ended(ctx, err)
		}
	}
}

// ended is ctx's cause with what the last attempt met; the last attempt's error alone
// when it already says the cause.
func ended(ctx context.Context, last error) error {
	cause := context.Cause(ctx)
	if errors.Is(last, cause) {
		return last
	}
	return fmt.Errorf("%w (the last attempt: %v)", cause, last)
}
