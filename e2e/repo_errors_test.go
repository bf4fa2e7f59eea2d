//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/minio/minio-go/v7"
)

// TestRepoBadInput: each mistake a DBA can make with a repository fails with one line
// that says what is wrong and what to do, a non-zero exit, no panic, quickly, and
// without showing the secret key.
func TestRepoBadInput(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	r := newS3Repo(t, "ferry-bad", "db")
	tmp := testdb.ShortDir(t)
	keyFile := filepath.Join(tmp, "key.txt")
	public := strings.TrimSpace(mustFerry(t, "keygen", "--output", keyFile).stdout)
	otherKey := filepath.Join(tmp, "other.txt")
	mustFerry(t, "keygen", "--output", otherKey)
	id := strings.TrimSpace(r.run(t, repoBackupArgs(src, r.url, "--encrypt-to", public)...).stdout)

	// A repository written by a newer ferry, next to ours.
	newer := []byte(`{"format": 99, "tool": "ferry", "tool_version": "9.0"}`)
	if _, err := r.srv.Client(t).PutObject(context.Background(), r.bucket, "future/ferry-repository.json", bytes.NewReader(newer), int64(len(newer)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) []string { return append(append([]string{}, r.env...), kv...) }
	datadir := filepath.Join(tmp, "never")
	cases := []struct {
		name string
		env  []string
		want string
		args []string
	}{
		{"wrong endpoint", env("AWS_ENDPOINT_URL=http://127.0.0.1:1"), "does not answer", repoBackupArgs(src, r.url)},
		{"wrong secret key", env("AWS_SECRET_ACCESS_KEY=not-the-secret"), "refused the credentials", repoBackupArgs(src, r.url)},
		{"unknown key id", env("AWS_ACCESS_KEY_ID=NOSUCHKEY"), "refused the credentials", []string{"list", "--repo", r.url}},
		{"no credentials", env("AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="), "no S3 credentials found", []string{"list", "--repo", r.url}},
		{"missing bucket", r.env, `bucket "no-such-bucket" does not exist`, repoBackupArgs(src, "s3://no-such-bucket/db")},
		{"not a repository", r.env, "no ferry repository", []string{"list", "--repo", "s3://ferry-bad/elsewhere"}},
		{"newer format", r.env, "upgrade ferry", []string{"restore", "--repo", "s3://ferry-bad/future", "latest", "--datadir", datadir}},
		{"unknown backup id", r.env, "no such backup", []string{"restore", "--repo", r.url, "20990101t000000z-deadbeef", "--datadir", datadir}},
		{"unknown backup id (verify)", r.env, "no such backup", []string{"verify", "--repo", r.url, "nope"}},
		{"no backup id", r.env, "an id from ferry list, or latest", []string{"restore", "--repo", r.url, "--datadir", datadir}},
		{"missing key", r.env, "--identity-file", []string{"restore", "--repo", r.url, id, "--datadir", datadir}},
		{"wrong key", r.env, "wrong key", []string{"verify", "--repo", r.url, id, "--identity-file", otherKey}},
		{"wrong key (restore)", r.env, "wrong key", []string{"restore", "--repo", r.url, id, "--datadir", datadir, "--identity-file", otherKey}},
		{"two destinations", r.env, "give one of --target-dir, --stream or --repo", repoBackupArgs(src, r.url, "--target-dir", filepath.Join(tmp, "d"))},
		{"repo options without a repo", r.env, "apply to --repo", []string{"backup", "--socket", src.Socket, "--user", "root", "--target-dir", filepath.Join(tmp, "d"), "--part-size", "8M"}},
		{"budget too small", r.env, "--max-memory", repoBackupArgs(src, r.url, "--part-size", "64M", "--max-memory", "100M")},
		{"credentials in the URL", r.env, "must not carry credentials", []string{"list", "--repo", "s3://AKIA:" + testdb.S3SecretKey + "@ferry-bad/db"}},
		{"expire without a policy", r.env, "--keep-last", []string{"expire", "--repo", r.url}},
		{"unknown scheme", r.env, "unsupported scheme", []string{"list", "--repo", "gs://bucket/x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			res := wantFail(t, c.env, c.want, c.args...)
			if strings.Contains(res.stderr+res.stdout, testdb.S3SecretKey) {
				t.Errorf("the output shows the secret key:\n%s", res.stderr)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v to fail", d)
			}
			noDatadir(t, datadir)
			if ents, _ := os.ReadDir(tmp); len(ents) > 3 {
				t.Errorf("a refused command left files in %s: %v", tmp, ents)
			}
		})
	}
	// Only the first backup was made: every refused command left the repository as it was,
	// and a backup refused by the server checks creates no repository.
	if list := listRepo(t, r.env, r.url, "--all"); len(list) != 1 || list[0].ID != id {
		t.Fatalf("list after the refused commands: %+v", list)
	}
	wantFail(t, r.env, "lacks privileges", append(repoBackupArgs(src, "s3://ferry-bad/fresh"), "--user", "nobody")...)
	wantFail(t, r.env, "no ferry repository", "list", "--repo", "s3://ferry-bad/fresh")
}
