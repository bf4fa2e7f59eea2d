package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
)

// flaky is a Storage whose operations fail with the scheduled errors first: a fake
// only to inject faults on demand (the real backends run the conformance suite).
type flaky struct {
	Storage
	errs  []error // returned by successive calls, then nil
	calls int
	keys  []string // what List yields
	cut   int      // List fails transiently after this many keys, once
}

func (f *flaky) next() error {
	f.calls++
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func (f *flaky) Put(context.Context, string, io.ReaderAt, int64, uint32) error { return f.next() }

func (f *flaky) Get(_ context.Context, _ string, _, _ int64, fn func(io.Reader) error) error {
	if err := f.next(); err != nil {
		return err
	}
	return fn(strings.NewReader("data"))
}

func (f *flaky) List(_ context.Context, _ string, fn func(ObjectInfo) error) error {
	f.calls++
	for i, k := range f.keys {
		if f.cut > 0 && i == f.cut {
			f.cut = 0
			return Transient(errors.New("connection reset"))
		}
		if err := fn(ObjectInfo{Key: k}); err != nil {
			return err
		}
	}
	return nil
}

func TestRetryTransientUntilSuccess(t *testing.T) {
	f := &flaky{errs: []error{Transient(errors.New("503 SlowDown")), Transient(errors.New("reset")), Transient(errors.New("timeout"))}}
	ns := &backoff.Fake{}
	r := WithRetry(f, RetryOptions{Clock: ns, Base: 100 * time.Millisecond, Max: time.Second})
	if err := r.Put(context.Background(), "k", nil, 0, 0); err != nil {
		t.Fatalf("put: %v", err)
	}
	if f.calls != 4 || len(ns.Waits()) != 3 {
		t.Fatalf("%d calls, %d waits; want 4 and 3", f.calls, len(ns.Waits()))
	}
	// Exponential with jitter: each wait lies in [step/2, step], steps 100, 200, 400 ms.
	for i, w := range ns.Waits() {
		step := 100 * time.Millisecond << i
		if w < step/2 || w > step {
			t.Errorf("wait %d is %v, want within [%v, %v]", i, w, step/2, step)
		}
	}
}

func TestRetryPermanentAtOnce(t *testing.T) {
	perm := errors.New("access denied")
	f := &flaky{errs: []error{perm}}
	r := WithRetry(f, RetryOptions{Clock: &backoff.Fake{}})
	if err := r.Put(context.Background(), "k", nil, 0, 0); !errors.Is(err, perm) || f.calls != 1 {
		t.Fatalf("err %v after %d calls; want the permanent error after 1", err, f.calls)
	}
}

func TestRetryBounded(t *testing.T) {
	var errs []error
	for range 50 {
		errs = append(errs, Transient(errors.New("503")))
	}
	f := &flaky{errs: errs}
	ns := &backoff.Fake{}
	r := WithRetry(f, RetryOptions{Attempts: 5, Clock: ns, Base: time.Second, Max: 4 * time.Second})
	err := r.Get(context.Background(), "k", 0, -1, func(io.Reader) error { return nil })
	if !IsTransient(err) || f.calls != 5 {
		t.Fatalf("err %v after %d calls; want a transient error after 5", err, f.calls)
	}
	for _, w := range ns.Waits() {
		if w > 4*time.Second {
			t.Errorf("wait %v exceeds the 4 s cap", w)
		}
	}
}

func TestRetryStopsWhenCancelled(t *testing.T) {
	f := &flaky{errs: []error{Transient(errors.New("503")), Transient(errors.New("503"))}}
	ctx, cancel := context.WithCancel(context.Background())
	r := WithRetry(f, RetryOptions{Clock: &backoff.Fake{OnSleep: func(time.Duration) { cancel() }}})
	if err := r.Put(ctx, "k", nil, 0, 0); !errors.Is(err, context.Canceled) || f.calls != 1 {
		t.Fatalf("err %v after %d calls", err, f.calls)
	}
}

// A listing broken off by a transient error resumes without repeating keys.
func TestRetryListResumes(t *testing.T) {
	f := &flaky{keys: []string{"a", "b", "c", "d"}, cut: 2}
	r := WithRetry(f, RetryOptions{Clock: &backoff.Fake{}})
	var got []string
	err := r.List(context.Background(), "", func(oi ObjectInfo) error { got = append(got, oi.Key); return nil })
	if err != nil || strings.Join(got, ",") != "a,b,c,d" || f.calls != 2 {
		t.Fatalf("got %v, err %v, %d calls", got, err, f.calls)
	}
}

// A refused credential or a missing bucket is permanent to every retry loop, not only
// to this one.
func TestAccessErrorPermanent(t *testing.T) {
	err := fmt.Errorf("open: %w", accessErr("bucket %q does not exist", "b"))
	if !backoff.IsPermanent(err) || !errors.Is(err, ErrAccess) || IsTransient(err) {
		t.Fatalf("%v: permanent %v, access %v", err, backoff.IsPermanent(err), errors.Is(err, ErrAccess))
	}
}

// flakyLocker is flaky with Object Lock: its Locker operations fail with the scheduled
// errors first.
type flakyLocker struct{ flaky }

func (f *flakyLocker) ObjectLockEnabled(context.Context) (bool, error) { return true, f.next() }
func (f *flakyLocker) PutRetained(context.Context, string, io.ReaderAt, int64, uint32, Retention) error {
	return f.next()
}
func (f *flakyLocker) Retention(context.Context, string) (Retention, error) {
	return Retention{Mode: Governance}, f.next()
}
func (f *flakyLocker) Purge(context.Context, string) error { return f.next() }

// The Object Lock of a backend is reached through WithRetry with its retries: a
// transient error is retried, a refused locked version is not; a directory has none.
func TestRetryLocker(t *testing.T) {
	ctx := context.Background()
	f := &flakyLocker{flaky{errs: []error{Transient(errors.New("503")), nil, fmt.Errorf("delete: %w", ErrLocked)}}}
	l := LockerOf(WithRetry(f, RetryOptions{Clock: &backoff.Fake{}}))
	if l == nil {
		t.Fatal("no Locker through WithRetry")
	}
	if err := l.PutRetained(ctx, "k", nil, 0, 0, Retention{Mode: Governance, Until: time.Now()}); err != nil || f.calls != 2 {
		t.Fatalf("put: %v after %d calls, want success after 2", err, f.calls)
	}
	if err := l.Purge(ctx, "backups/x/"); !errors.Is(err, ErrLocked) || f.calls != 3 {
		t.Fatalf("purge: %v after %d calls, want ErrLocked at once", err, f.calls)
	}
	fs, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if LockerOf(WithRetry(fs, RetryOptions{})) != nil {
		t.Fatal("a directory has a Locker")
	}
}
