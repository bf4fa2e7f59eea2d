//go:build e2e

package storage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/storage/storagetest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestS3Conformance runs the suite against a real S3 server (versitygw), one bucket per
// test, under a key prefix as repositories use.
func TestS3Conformance(t *testing.T) {
	srv := testdb.StartS3(t)
	setEnv(t, srv.Env())
	n := 0
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		n++
		bucket := "suite-" + string(rune('a'+n))
		srv.MakeBucket(t, bucket)
		s, err := storage.Open(context.Background(), storage.Config{URL: "s3://" + bucket + "/some/prefix", Retry: storage.RetryOptions{Attempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// setEnv sets KEY=VALUE pairs for the test.
func setEnv(t *testing.T, env []string) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// TestS3ConfigurationErrors: each mistake fails at Open with one line that says what to
// fix, quickly, and never shows the secret key.
func TestS3ConfigurationErrors(t *testing.T) {
	srv := testdb.StartS3(t)
	srv.MakeBucket(t, "there")
	cases := []struct {
		name string
		env  map[string]string
		url  string
		want string
	}{
		{"missing bucket", nil, "s3://not-there/x", `bucket "not-there" does not exist`},
		{"wrong secret", map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong-" + testdb.S3SecretKey}, "s3://there/x", "refused the credentials"},
		{"unknown key id", map[string]string{"AWS_ACCESS_KEY_ID": "NOSUCHKEY"}, "s3://there/x", "refused the credentials"},
		{"no credentials", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "s3://there/x", "no S3 credentials found"},
		{"endpoint not listening", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, "s3://there/x", "does not answer"},
		{"bad endpoint", map[string]string{"AWS_ENDPOINT_URL": "ftp://x"}, "s3://there/x", "not an http(s) URL"},
		{"credentials in the URL", nil, "s3://AK:SECRET@there/x", "must not carry credentials"},
		{"unknown scheme", nil, "gs://there/x", "unsupported scheme"},
		{"missing directory", nil, "/nonexistent/ferry-repo", "repository directory /nonexistent/ferry-repo does not exist: check the path, or create the directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setEnv(t, srv.Env())
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := storage.Open(context.Background(), storage.Config{URL: c.url, Retry: storage.RetryOptions{Base: 1}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), testdb.S3SecretKey) || strings.Contains(err.Error(), ":SECRET@") {
				t.Fatalf("the error shows a secret: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the error is not one line: %q", err)
			}
		})
	}
}
