package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

// LockMode is an S3 Object Lock retention mode.
type LockMode string

// The two retention modes of S3 Object Lock (docs/security.md says what each protects
// against).
const (
	// Governance: no version can be deleted or overwritten before its date, except by
	// a request that asks to bypass governance retention (x-amz-bypass-governance-retention)
	// from credentials holding s3:BypassGovernanceRetention; its date can be shortened
	// the same way.
	Governance LockMode = "GOVERNANCE"
	// Compliance: nobody, the account's root user included, can delete the version or
	// shorten its date before it passes; only deleting the AWS account ends it.
	Compliance LockMode = "COMPLIANCE"
)

// Retention is the Object Lock of one object version: it cannot be deleted before
// Until. The zero Retention is no lock.
type Retention struct {
	Mode  LockMode
	Until time.Time
}

// IsZero reports whether r is no lock.
func (r Retention) IsZero() bool { return r.Mode == "" }

// ErrLocked means the server refused to delete an object version because its Object
// Lock retention has not expired.
var ErrLocked = errors.New("locked by S3 Object Lock")

// ErrNoObjectLock means the storage cannot lock objects: a directory, or a bucket
// created without Object Lock.
var ErrNoObjectLock = errors.New("no Object Lock")

// Locker is the Object Lock of a bucket whose objects can be stored with a retention.
// Such a bucket is always versioned: a DELETE without a version only hides an object
// behind a delete marker, so Purge deletes versions.
type Locker interface {
	// ObjectLockEnabled reports whether the bucket has Object Lock enabled (its
	// object lock configuration, GetObjectLockConfiguration).
	ObjectLockEnabled(ctx context.Context) (bool, error)
	// PutRetained is Storage.Put with a retention on the version stored.
	PutRetained(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32, r Retention) error
	// Retention is the retention of the object's current version (zero if none); a
	// missing object is ErrNotExist.
	Retention(ctx context.Context, key string) (Retention, error)
	// Purge deletes every version and delete marker of every object whose key starts
	// with prefix, never bypassing a retention: a version still locked is ErrLocked
	// (the others may be gone by then).
	Purge(ctx context.Context, prefix string) error
}

// LockerOf returns the Object Lock of s, with s's retries, or nil if its backend has
// none (a directory).
func LockerOf(s Storage) Locker {
	switch l := s.(type) {
	case Locker:
		return l
	case interface{ Locker() Locker }:
		return l.Locker()
	}
	return nil
}

// Locker returns the Object Lock of the wrapped storage with the retries of r, or
// nil if it has none.
func (r *Retrying) Locker() Locker {
	l := LockerOf(r.Storage)
	if l == nil {
		return nil
	}
	return &retryingLocker{r: r, l: l}
}

// retryingLocker repeats a Locker's operations on transient errors, as Retrying does.
type retryingLocker struct {
	r *Retrying
	l Locker
}

func (rl *retryingLocker) ObjectLockEnabled(ctx context.Context) (bool, error) {
	var on bool
	err := rl.r.do(ctx, "get object lock configuration", "", func() (err error) {
		on, err = rl.l.ObjectLockEnabled(ctx)
		return err
	})
	return on, err
}

func (rl *retryingLocker) PutRetained(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32, ret Retention) error {
	return rl.r.do(ctx, "put", key, func() error { return rl.l.PutRetained(ctx, key, data, size, crc, ret) })
}

func (rl *retryingLocker) Retention(ctx context.Context, key string) (Retention, error) {
	var ret Retention
	err := rl.r.do(ctx, "get retention", key, func() (err error) {
		ret, err = rl.l.Retention(ctx, key)
		return err
	})
	return ret, err
}

// Purge starts again from a new listing after a transient error: what was deleted is
// no longer listed.
func (rl *retryingLocker) Purge(ctx context.Context, prefix string) error {
	return rl.r.do(ctx, "purge", prefix, func() error { return rl.l.Purge(ctx, prefix) })
}
