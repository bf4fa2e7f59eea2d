// Package storage is where a repository's objects live: a local directory (also NFS)
// or a bucket prefix on an S3-compatible server. Both backends offer the same small
// Storage interface; retries are a decorator (WithRetry), never inside a backend.
// Objects are written whole and never changed in place.
package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

// Storage is a flat namespace of objects under one root (a directory or a bucket
// prefix). Keys are '/'-separated and relative to the root. Implementations are safe
// for concurrent use.
type Storage interface {
	// Location names the storage for messages, never with credentials.
	Location() string
	// Put stores size bytes of data under key, replacing any object there. crc is the
	// CRC-32C of the bytes: the backend has it verified on arrival (the S3 server
	// checks the x-amz-checksum-crc32c header) and refuses a mismatch. data may be
	// read several times (on retries).
	Put(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32) error
	// Get calls fn with the object's bytes from off: n bytes, or to the end if n < 0.
	// fn may be called again when a retry decorator repeats the read after a transient
	// error, so it must be idempotent. A missing object is ErrNotExist.
	Get(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error
	// Stat describes one object; a missing one is ErrNotExist.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List calls fn for every object whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// Prefixes returns, in order, the names one level below prefix (which ends in '/')
	// that hold objects: for "backups/", the "ID" of every "backups/ID/...".
	Prefixes(ctx context.Context, prefix string) ([]string, error)
	// Delete removes an object; a missing one is not an error.
	Delete(ctx context.Context, key string) error
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key      string
	Size     int64
	Modified time.Time
}

// ErrNotExist means the object does not exist.
var ErrNotExist = errors.New("object does not exist")

// TransientError marks an error worth retrying: a server that is busy (503 SlowDown,
// 500), a dropped or reset connection, a timeout. Anything else is permanent.
type TransientError struct{ Err error }

// Error implements error.
func (e *TransientError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TransientError) Unwrap() error { return e.Err }

// Transient wraps err as worth retrying (nil stays nil).
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// IsTransient reports whether err is worth retrying.
func IsTransient(err error) bool {
	var t *TransientError
	return errors.As(err, &t)
}
