package storage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ferry-backup/ferry/internal/setting"
)

// S3 stores objects in a bucket of an S3-compatible server under a key prefix, one
// PUT per object with an x-amz-checksum-crc32c header the server verifies. It retries
// nothing itself: wrap it with WithRetry.
type S3 struct {
	t    *s3Target
	c    *minio.Client
	core minio.Core
}

// requestTimeout bounds one request without a body to send (GET headers, LIST, HEAD,
// DELETE); a PUT gets this plus the time to send its body at putMinRate.
const (
	requestTimeout = 2 * time.Minute
	putMinRate     = 256 << 10 // bytes/s
	// idleTimeout ends a GET whose body stalls that long (a dead connection).
	idleTimeout = time.Minute
)

func newS3(t *s3Target) (*S3, error) {
	tr, err := s3Transport(t)
	if err != nil {
		return nil, err
	}
	lookup := map[string]minio.BucketLookupType{"auto": minio.BucketLookupAuto, "path": minio.BucketLookupPath, "virtual": minio.BucketLookupDNS}[t.lookup]
	if t.lookup == "auto" && !strings.HasSuffix(t.endpoint.Hostname(), ".amazonaws.com") {
		lookup = minio.BucketLookupPath // on-premises servers rarely have wildcard DNS
	}
	c, err := minio.New(t.endpoint.Host, &minio.Options{
		Creds:        t.creds,
		Secure:       t.endpoint.Scheme == "https",
		Region:       t.region,
		BucketLookup: lookup,
		Transport:    tr,
		MaxRetries:   1, // retries are WithRetry's job
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", t.endpoint.Redacted(), err)
	}
	return &S3{t: t, c: c, core: minio.Core{Client: c}}, nil
}

// s3Transport is an HTTP transport sized for many parallel transfers.
func s3Transport(t *s3Target) (*http.Transport, error) {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		ResponseHeaderTimeout: requestTimeout,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ExpectContinueTimeout: 5 * time.Second,
		DisableCompression:    true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	if t.caFile != "" {
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, setting.Errorf("%s: %w", setting.S3CAFile, err)
		}
		pool, _ := x509.SystemCertPool()
		if pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, setting.Errorf("%s %s holds no PEM certificate", setting.S3CAFile, t.caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return tr, nil
}

// Location implements Storage.
func (s *S3) Location() string {
	return "s3://" + path.Join(s.t.bucket, s.t.prefix) + " at " + s.t.endpoint.Redacted()
}

func (s *S3) key(k string) string {
	if s.t.prefix == "" {
		return k
	}
	return s.t.prefix + "/" + k
}

// Put implements Storage.
func (s *S3) Put(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32) error {
	return s.put(ctx, key, data, size, crc, Retention{})
}

// put stores an object, with a retention unless ret is zero.
func (s *S3) put(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32, ret Retention) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout+time.Duration(size/putMinRate)*time.Second)
	defer cancel()
	sum := binary.BigEndian.AppendUint32(nil, crc)
	opts := minio.PutObjectOptions{
		UserMetadata: map[string]string{"x-amz-checksum-crc32c": base64.StdEncoding.EncodeToString(sum)},
		// The payload is protected by the CRC-32C the server verifies (and TLS): no
		// SHA-256 of every byte on the database host.
		DisableContentSha256: true,
	}
	if !ret.IsZero() {
		opts.Mode, opts.RetainUntilDate = minio.RetentionMode(ret.Mode), ret.Until
	}
	_, err := s.core.PutObject(ctx, s.t.bucket, s.key(key), io.NewSectionReader(data, 0, size), size, "", "", opts)
	return s.wrap("put", key, err)
}

// Get implements Storage.
func (s *S3) Get(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var opts minio.GetObjectOptions
	if off > 0 || n >= 0 {
		end := int64(0)
		if n >= 0 {
			if n == 0 {
				return fn(strings.NewReader(""))
			}
			end = off + n - 1
		}
		if err := opts.SetRange(off, end); err != nil {
			return fmt.Errorf("get %s: %w", key, err)
		}
	}
	timer := time.AfterFunc(idleTimeout, func() { cancel(errStalled) })
	defer timer.Stop()
	body, _, _, err := s.core.GetObject(ctx, s.t.bucket, s.key(key), opts)
	if err != nil {
		return s.wrap("get", key, stalled(ctx, err))
	}
	defer body.Close()
	return fn(&bodyReader{r: body, ctx: ctx, timer: timer, key: key})
}

// errStalled ends a GET whose body stopped arriving for idleTimeout.
var errStalled = Transient(fmt.Errorf("no data for %v (stalled connection)", idleTimeout))

// stalled replaces the cancellation of a stalled GET by errStalled.
func stalled(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errStalled) {
		return errStalled
	}
	return err
}

// bodyReader marks errors of the response body transient (the connection dropped) and
// cancels a read that stalls for idleTimeout.
type bodyReader struct {
	r     io.Reader
	ctx   context.Context
	timer *time.Timer
	key   string
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.timer.Reset(idleTimeout)
	if err != nil && err != io.EOF {
		// The body broke off (reset, drop, stall): reading it again may work.
		return n, Transient(fmt.Errorf("s3 read %s: %w", b.key, stalled(b.ctx, err)))
	}
	return n, err
}

// Stat implements Storage.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	oi, err := s.c.StatObject(ctx, s.t.bucket, s.key(key), minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, s.wrap("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: oi.Size, Modified: oi.LastModified}, nil
}

// List implements Storage.
func (s *S3) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	root := s.key("")
	for oi := range s.c.ListObjects(ctx, s.t.bucket, minio.ListObjectsOptions{Prefix: s.key(prefix), Recursive: true}) {
		if oi.Err != nil {
			return s.wrap("list", prefix, oi.Err)
		}
		if err := fn(ObjectInfo{Key: strings.TrimPrefix(oi.Key, root), Size: oi.Size, Modified: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Prefixes implements Storage.
func (s *S3) Prefixes(ctx context.Context, prefix string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	full := s.key(prefix)
	var out []string
	for oi := range s.c.ListObjects(ctx, s.t.bucket, minio.ListObjectsOptions{Prefix: full, Recursive: false}) {
		if oi.Err != nil {
			return nil, s.wrap("list", prefix, oi.Err)
		}
		if name, ok := strings.CutSuffix(strings.TrimPrefix(oi.Key, full), "/"); ok && name != "" {
			out = append(out, name)
		}
	}
	return out, ctx.Err()
}

// Delete implements Storage.
func (s *S3) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err := s.c.RemoveObject(ctx, s.t.bucket, s.key(key), minio.RemoveObjectOptions{})
	if errors.Is(s.wrap("delete", key, err), ErrNotExist) {
		return nil
	}
	return s.wrap("delete", key, err)
}
