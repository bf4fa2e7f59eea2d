package storage

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"
)

// purgeDeletes is how many version deletes Purge runs at once.
const purgeDeletes = 16

// ObjectLockEnabled implements Locker.
func (s *S3) ObjectLockEnabled(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	status, _, _, _, err := s.c.GetObjectLockConfig(ctx, s.t.bucket)
	var resp minio.ErrorResponse
	switch {
	case err == nil:
		return status == "Enabled", nil
	case errors.As(err, &resp) && resp.Code == "ObjectLockConfigurationNotFoundError":
		return false, nil
	case errors.As(err, &resp) && resp.Code == "AccessDenied":
		return false, accessErr("s3 get object lock configuration of %s at %s: access denied: the credentials need s3:GetBucketObjectLockConfiguration", s.t.bucket, s.t.endpoint.Redacted())
	}
	return false, s.wrap("get object lock configuration", s.t.bucket, err)
}

// PutRetained implements Locker.
func (s *S3) PutRetained(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32, r Retention) error {
	if r.IsZero() {
		return fmt.Errorf("s3 put %s: no retention given (internal error)", key)
	}
	return s.put(ctx, key, data, size, crc, r)
}

// Retention implements Locker.
func (s *S3) Retention(ctx context.Context, key string) (Retention, error) {
	return s.retention(ctx, key, "")
}

// retention reads the retention of a version of key ("": the current one) with
// GetObjectRetention. versitygw (1.8) answers it with an <ObjectLockRetention> root
// element where S3 has <Retention>, which the client refuses: the retention is then
// read from the x-amz-object-lock-* headers of a HEAD, which S3 and versitygw both
// send to a caller allowed to read it.
func (s *S3) retention(ctx context.Context, key, version string) (Retention, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	mode, until, err := s.c.GetObjectRetention(ctx, s.t.bucket, s.key(key), version)
	var resp minio.ErrorResponse
	var bad xml.UnmarshalError
	switch {
	case err == nil && mode != nil && until != nil:
		return Retention{Mode: LockMode(*mode), Until: until.UTC()}, nil
	case err == nil, errors.As(err, &resp) && resp.Code == "NoSuchObjectLockConfiguration":
		return Retention{}, nil
	case errors.As(err, &bad):
		return s.headRetention(ctx, key, version)
	}
	return Retention{}, s.wrap("get retention", key, err)
}

// headRetention reads a version's retention from the headers of a HEAD.
func (s *S3) headRetention(ctx context.Context, key, version string) (Retention, error) {
	oi, err := s.c.StatObject(ctx, s.t.bucket, s.key(key), minio.StatObjectOptions{VersionID: version})
	if err != nil {
		return Retention{}, s.wrap("stat", key, err)
	}
	mode := oi.Metadata.Get("X-Amz-Object-Lock-Mode")
	if mode == "" {
		return Retention{}, nil
	}
	until, err := time.Parse(time.RFC3339, oi.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
	if err != nil {
		return Retention{}, fmt.Errorf("s3 stat %s: retain-until date: %w", key, err)
	}
	return Retention{Mode: LockMode(mode), Until: until.UTC()}, nil
}

// Purge implements Locker: one listing of every version under prefix, then a DELETE
// of each version by its id, which removes it for good (a DELETE without a version
// only adds a delete marker on a versioned bucket, and succeeds on a locked object).
// It never asks to bypass governance retention.
func (s *S3) Purge(ctx context.Context, prefix string) error {
	var versions []minio.ObjectInfo
	lctx, cancel := context.WithCancel(ctx)
	for oi := range s.c.ListObjects(lctx, s.t.bucket, minio.ListObjectsOptions{Prefix: s.key(prefix), Recursive: true, WithVersions: true}) {
		if oi.Err != nil {
			cancel()
			return s.wrap("list versions", prefix, oi.Err)
		}
		versions = append(versions, oi)
	}
	cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(purgeDeletes)
	root := s.key("")
	for _, v := range versions {
		g.Go(func() error { return s.deleteVersion(gctx, v.Key[len(root):], v.VersionID) })
	}
	return g.Wait()
}

// deleteVersion deletes one version of key for good. A refusal is ErrLocked with the
// version's date when its retention has not expired, an access error otherwise.
func (s *S3) deleteVersion(ctx context.Context, key, version string) error {
	dctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err := s.c.RemoveObject(dctx, s.t.bucket, s.key(key), minio.RemoveObjectOptions{VersionID: version})
	var resp minio.ErrorResponse
	switch {
	case err == nil:
		return nil
	case errors.As(err, &resp) && (resp.Code == "NoSuchVersion" || resp.Code == "NoSuchKey"):
		return nil
	case errors.As(err, &resp) && (resp.Code == "AccessDenied" || resp.StatusCode == http.StatusForbidden):
		if r, rerr := s.retention(ctx, key, version); rerr == nil && r.Until.After(time.Now()) {
			return fmt.Errorf("s3 delete %s (version %s): %w (%s) until %s", key, version, ErrLocked, r.Mode, r.Until.Format(time.RFC3339))
		}
		return accessErr("s3 delete %s (version %s) at %s: access denied: deleting a version needs s3:DeleteObjectVersion on %s", key, version, s.t.endpoint.Redacted(), s.t.bucket)
	}
	return s.wrap("delete", key, err)
}
