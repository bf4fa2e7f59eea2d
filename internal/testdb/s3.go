package testdb

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 test credentials: made up, and distinctive so that tests can check they never
// appear in logs, errors or stored objects.
const (
	S3AccessKey = "FERRYTESTKEYID7Q2"
	S3SecretKey = "ferry-test-secret-9c1e5a77d3b04f68"
)

// S3Server is a real S3-compatible server (versitygw, posix backend) on 127.0.0.1. Its
// objects are plain files under Dir/<bucket>/<key>, so tests can damage them. Buckets
// made with MakeLockedBucket are versioned with Object Lock enabled; their older
// versions live under a separate directory.
type S3Server struct {
	Endpoint string // http://127.0.0.1:port
	Dir      string
	cmd      *exec.Cmd
}

// versitygwPath finds the versitygw binary: $FERRY_VERSITYGW, .bin/versitygw at the
// module root (where .ci/run builds the version pinned in tools/go.mod), or PATH.
func versitygwPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FERRY_VERSITYGW"); p != "" {
		return p
	}
	if root, err := moduleRoot(); err == nil {
		if p := filepath.Join(root, ".bin", "versitygw"); fileExists(p) {
			return p
		}
	}
	return Tool(t, "versitygw", "versitygw (cd tools && go build -o ../.bin/versitygw github.com/versity/versitygw/cmd/versitygw)")
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) && fileExists(filepath.Join(dir, "tools", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("module root not found")
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// StartS3 starts versitygw on a free loopback port with a fresh data directory and
// stops it when the test ends.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	needServers(t, "an S3 server")
	bin := versitygwPath(t)
	s := &S3Server{Dir: filepath.Join(t.TempDir(), "s3")}
	if err := os.MkdirAll(s.Dir, 0o750); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	versions := filepath.Join(filepath.Dir(s.Dir), "s3-versions") // only versioned buckets use it
	if err := os.MkdirAll(versions, 0o750); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, "--access", S3AccessKey, "--secret", S3SecretKey,
		"--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet", "posix", "--versioning-dir", versions, s.Dir)
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		logf.Close()
	})
	s.waitReady(t)
	return s
}

// waitReady polls until the server answers HTTP (403 without credentials).
func (s *S3Server) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("versitygw did not answer on %s within 30 s", s.Endpoint)
}

// Client returns an S3 client of the server for test setup and inspection.
func (s *S3Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{
		Creds: credentials.NewStaticV4(S3AccessKey, S3SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// MakeBucket creates a bucket.
func (s *S3Server) MakeBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
}

// MakeLockedBucket creates a bucket with Object Lock enabled (so versioned), as
// x-amz-bucket-object-lock-enabled: true asks.
func (s *S3Server) MakeLockedBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{ObjectLocking: true}); err != nil {
		t.Fatalf("make bucket %s with Object Lock: %v", name, err)
	}
}

// Env is the environment that points AWS clients (ferry included) at the server with
// the test credentials; the instance-metadata lookup is off, so nothing leaves
// loopback.
func (s *S3Server) Env() []string {
	return []string{"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_ACCESS_KEY_ID=" + S3AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + S3SecretKey, "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
}

// ObjectPath is the file holding an object on the server's disk.
func (s *S3Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}
