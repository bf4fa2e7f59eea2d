//go:build e2e

package repo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/sink/sinktest"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestRepoS3Conformance runs the Sink suite on a repository in a real S3 server
// (versitygw), one bucket per test, under a key prefix.
func TestRepoS3Conformance(t *testing.T) {
	srv := testdb.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	n := 0
	sinktest.Run(t, repoEnd(func(t *testing.T) storage.Storage {
		n++
		bucket := fmt.Sprintf("sinktest-%d", n)
		srv.MakeBucket(t, bucket)
		st, err := storage.Open(context.Background(), storage.Config{URL: "s3://" + bucket + "/repo", Retry: storage.RetryOptions{Attempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}))
}
