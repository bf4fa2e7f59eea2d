package repo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/storage"
)

// ErrLockMismatch means the Object Lock the server holds on a backup is weaker than
// the one its manifest records: missing, shortened, or compliance turned governance.
var ErrLockMismatch = errors.New("the object lock is weaker than recorded")

// CanLock returns the Object Lock of the repository's storage, or an error saying
// what to do if it has none: a directory, or a bucket without Object Lock enabled
// (one request: the bucket's object lock configuration).
func (r *Repo) CanLock(ctx context.Context) (storage.Locker, error) {
	l := storage.LockerOf(r.st)
	if l == nil {
		return nil, setting.Errorf("%s: %s is not an S3 bucket and cannot lock objects: Object Lock needs an S3 bucket created with Object Lock enabled", setting.LockDays, r.Location())
	}
	on, err := l.ObjectLockEnabled(ctx)
	if err != nil {
		return nil, err
	}
	if !on {
		return nil, setting.Errorf("%s: the bucket of %s does not have Object Lock enabled (no object lock configuration): use a bucket created with Object Lock enabled, or back up without %s", setting.LockDays, r.Location(), setting.LockDays)
	}
	return l, nil
}

// purger is the Object Lock of the repository's bucket if it has Object Lock enabled
// (its deletes must then remove versions), nil otherwise.
func (r *Repo) purger(ctx context.Context) (storage.Locker, error) {
	l := storage.LockerOf(r.st)
	if l == nil {
		return nil, nil
	}
	on, err := l.ObjectLockEnabled(ctx)
	if err != nil || !on {
		return nil, err
	}
	return l, nil
}

// newLock is the lock of a backup started at start and locked for d in mode: its
// date is rounded up to the second (S3 keeps whole seconds), so every object is kept
// at least d from the start.
func newLock(start time.Time, d time.Duration, mode storage.LockMode) *manifest.Lock {
	if mode == "" {
		mode = storage.Governance
	}
	until := start.UTC().Add(d + time.Second - 1).Truncate(time.Second)
	return &manifest.Lock{Mode: string(mode), RetainUntil: until}
}

// retention is the storage's form of a recorded lock.
func retention(l *manifest.Lock) storage.Retention {
	return storage.Retention{Mode: storage.LockMode(l.Mode), Until: l.RetainUntil}
}

// Lock is the Object Lock an entry records: its manifest's, or an unfinished
// backup's marker's; nil if none.
func (e Entry) Lock() *manifest.Lock {
	switch {
	case e.Manifest != nil:
		return e.Manifest.Lock
	case e.Marker != nil:
		return e.Marker.Lock
	}
	return nil
}

// DescribeLock says in words what a recorded lock is at now: "governance until
// 2026-12-30T10:00:00Z" or "governance, expired 2026-12-30T10:00:00Z"; "" for none.
func DescribeLock(l *manifest.Lock, now time.Time) string {
	if l == nil {
		return ""
	}
	mode := strings.ToLower(l.Mode)
	if l.LockedAt(now) {
		return mode + " until " + l.RetainUntil.Format(time.RFC3339)
	}
	return mode + ", expired " + l.RetainUntil.Format(time.RFC3339)
}

// ErrLockNotHere means a backup records a lock that its repository cannot hold: it
// was copied (ferry copy) from a locked backup into a directory or a bucket without
// Object Lock. Not a failure: such a repository never held a lock that could have
// been shortened.
var ErrLockNotHere = errors.New("its lock is not held by this repository, which has no Object Lock (a copy of a locked backup)")

// CheckLock compares the lock backup m records with the retention the server holds
// on its manifest (GetObjectRetention): a lock missing, shortened or changed from
// compliance to governance is ErrLockMismatch (someone with the bucket's credentials
// weakened it). It checks nothing for a backup without a lock, one whose lock has
// expired at now, or a repository that cannot lock (a directory copy of a bucket).
func (r *Repo) CheckLock(ctx context.Context, m *manifest.Manifest, now time.Time) error {
	if !m.Lock.LockedAt(now) {
		return nil
	}
	l, err := r.purger(ctx)
	if err != nil {
		return err
	}
	if l == nil {
		return ErrLockNotHere
	}
	key := backupPrefix(m.ID) + manifestName
	got, err := l.Retention(ctx, key)
	if err != nil {
		return fmt.Errorf("backup %s: the Object Lock of %s: %w", m.ID, key, err)
	}
	want := DescribeLock(m.Lock, now)
	switch {
	case got.IsZero():
		return fmt.Errorf("backup %s: %w: its manifest records %s, the server holds no lock on %s", m.ID, ErrLockMismatch, want, key)
	case got.Until.Before(m.Lock.RetainUntil):
		return fmt.Errorf("backup %s: %w: its manifest records %s, the server holds %s on %s (shortened)", m.ID, ErrLockMismatch, want, strings.ToLower(string(got.Mode))+" until "+got.Until.Format(time.RFC3339), key)
	case m.Lock.Mode == string(storage.Compliance) && got.Mode != storage.Compliance:
		return fmt.Errorf("backup %s: %w: its manifest records %s, the server holds %s mode on %s", m.ID, ErrLockMismatch, want, strings.ToLower(string(got.Mode)), key)
	}
	return nil
}
