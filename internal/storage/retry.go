package storage

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
)

// RetryOptions bound the retries of transient errors.
type RetryOptions struct {
	Attempts   int           // tries per operation, the first included; default 10
	Base       time.Duration // first backoff; default 250 ms
	Max        time.Duration // longest backoff; default 15 s
	MaxElapsed time.Duration // give up after this long in one operation; default 3 min
	Log        *slog.Logger  // each retry is logged at warn level
	Clock      backoff.Clock // default the wall clock; tests pass a fake
}

func (o RetryOptions) withDefaults() RetryOptions {
	if o.Attempts <= 0 {
		o.Attempts = 10
	}
	if o.Base <= 0 {
		o.Base = 250 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 15 * time.Second
	}
	if o.MaxElapsed <= 0 {
		o.MaxElapsed = 3 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// policy is the backoff of one operation: each wait is half of an exponentially
// growing step plus a random part of the other half.
func (o RetryOptions) policy() backoff.Policy {
	return backoff.Policy{Initial: o.Base, Max: o.Max, Jitter: 0.5, Attempts: o.Attempts, MaxElapsed: o.MaxElapsed, Clock: o.Clock}
}

// Retrying is a Storage that repeats operations failing with a transient error
// (IsTransient), with exponential backoff and jitter, within the bounds of its options.
// Permanent errors (bad credentials, missing bucket, missing object) return at once.
type Retrying struct {
	Storage
	o RetryOptions
}

// WithRetry wraps s so that transient errors are retried.
func WithRetry(s Storage, o RetryOptions) *Retrying {
	return &Retrying{Storage: s, o: o.withDefaults()}
}

// do runs op until it succeeds, fails permanently, or the bounds are reached.
func (r *Retrying) do(ctx context.Context, what, key string, op func() error) error {
	attempts := 0
	err := backoff.Retry(ctx, r.o.policy(), func(context.Context) error { attempts++; return op() }, IsTransient,
		func(a backoff.Attempt) {
			r.o.Log.Warn("storage: retrying", "op", what, "key", key, "attempt", a.N, "wait", a.Wait.Round(time.Millisecond), "err", a.Err)
		})
	if IsTransient(err) && ctx.Err() == nil {
		r.o.Log.Warn("storage: giving up", "op", what, "key", key, "attempts", attempts, "err", err)
	}
	return err
}

// Put implements Storage.
func (r *Retrying) Put(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32) error {
	return r.do(ctx, "put", key, func() error { return r.Storage.Put(ctx, key, data, size, crc) })
}

// Get implements Storage; fn is called again for each attempt.
func (r *Retrying) Get(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	return r.do(ctx, "get", key, func() error { return r.Storage.Get(ctx, key, off, n, fn) })
}

// Stat implements Storage.
func (r *Retrying) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	var oi ObjectInfo
	err := r.do(ctx, "stat", key, func() (err error) {
		oi, err = r.Storage.Stat(ctx, key)
		return err
	})
	return oi, err
}

// List implements Storage. A listing interrupted by a transient error starts again
// after the last key already passed to fn, so fn sees each key once.
func (r *Retrying) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	last := ""
	return r.do(ctx, "list", prefix, func() error {
		return r.Storage.List(ctx, prefix, func(oi ObjectInfo) error {
			if oi.Key <= last {
				return nil
			}
			last = oi.Key
			return fn(oi)
		})
	})
}

// Prefixes implements Storage.
func (r *Retrying) Prefixes(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	err := r.do(ctx, "list", prefix, func() (err error) {
		out, err = r.Storage.Prefixes(ctx, prefix)
		return err
	})
	return out, err
}

// Delete implements Storage.
func (r *Retrying) Delete(ctx context.Context, key string) error {
	return r.do(ctx, "delete", key, func() error { return r.Storage.Delete(ctx, key) })
}
