package storage

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/setting"
)

// Config is how to reach a repository's storage.
type Config struct {
	URL string // s3://bucket/prefix, file:///dir or a directory path
	S3  S3Options
	// Setting names where URL came from in errors (default setting.Repo; a copy's
	// source and target have their own).
	Setting setting.Setting
	Retry   RetryOptions
	Log     *slog.Logger
}

// Open returns the storage a repository URL names, wrapped with retries. A local
// directory must exist (create it, e.g. an NFS mount point, first); an S3 bucket is
// checked with one request, so a wrong endpoint, wrong keys or a missing bucket fail
// here with a message saying what to fix.
func Open(ctx context.Context, c Config) (Storage, error) {
	s, err := openBackend(ctx, c)
	if err != nil {
		return nil, err
	}
	c.Retry.Log = c.Log
	return WithRetry(s, c.Retry), nil
}

func openBackend(ctx context.Context, c Config) (Storage, error) {
	which := cmp.Or(c.Setting, setting.Repo)
	if c.URL == "" {
		return nil, setting.Errorf("%s is required: s3://bucket/prefix or a directory", which)
	}
	switch {
	case strings.HasPrefix(c.URL, "s3://"):
		u, err := url.Parse(c.URL)
		if err != nil {
			return nil, setting.Errorf("%s %q: %w", which, c.URL, err)
		}
		t, err := resolveS3(u, c.S3, which)
		if err != nil {
			return nil, err
		}
		s, err := newS3(t)
		if err != nil {
			return nil, err
		}
		return s, s.probe(ctx)
	case strings.HasPrefix(c.URL, "file://"):
		u, err := url.Parse(c.URL)
		if err != nil || u.Host != "" && u.Host != "localhost" {
			return nil, setting.Errorf("%s %q: use file:///absolute/path", which, c.URL)
		}
		return NewFS(u.Path)
	case strings.Contains(c.URL, "://"):
		return nil, setting.Errorf("%s %q: unsupported scheme; use s3://bucket/prefix, file:///dir or a directory path", which, c.URL)
	}
	return NewFS(c.URL)
}

// probe checks the bucket is there and the credentials are accepted, retrying a busy
// or briefly unreachable server a few times only, so a wrong endpoint fails quickly.
func (s *S3) probe(ctx context.Context) error {
	r := WithRetry(s, RetryOptions{Attempts: 3})
	err := r.do(ctx, "probe", s.t.bucket, func() error {
		// A listing (not HEAD, which has no error body) tells a missing bucket from
		// refused credentials; ferry needs s3:ListBucket anyway.
		_, err := s.core.ListObjectsV2(s.t.bucket, s.key(""), "", "", "/", 1)
		return s.wrap("list", s.t.bucket, err)
	})
	if IsTransient(err) {
		return setting.Errorf("S3 endpoint %s does not answer (%s): check %s / AWS_ENDPOINT_URL and that the server is up", s.t.endpoint.Redacted(), brief(err), setting.S3Endpoint)
	}
	return err
}

// brief names the cause of a transport error in a few words.
func brief(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	}
	return err.Error()
}
