//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/minio/minio-go/v7"
)

// TestObjectLockBackups: backup --lock-days into a bucket with Object Lock enabled
// (versitygw) stores every object of the backup, its manifest too, with the retention
// its manifest records (governance by default, compliance asked); list shows the
// locks; expire --keep-last 1 keeps the older locked backup and says until when; the
// server refuses to delete a locked version; verify reports each backup's lock, and
// fails a backup whose lock was shortened behind ferry's back.
// --lock-days into a directory or a bucket without Object Lock is refused with one
// line and nothing written.
func TestObjectLockBackups(t *testing.T) {
	t.Parallel() // small server, two small backups, error paths
	src := smallSource(t, 5000)
	srv := testdb.StartS3(t)
	srv.MakeLockedBucket(t, "locked")
	srv.MakeBucket(t, "plain")
	env := srv.Env()
	c := srv.Client(t)
	ctx := context.Background()

	dir := filepath.Join(testdb.ShortDir(t), "repo")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	wantFail(t, nil, "--lock-days: "+dir+" is not an S3 bucket", repoBackupArgs(src, dir, "--lock-days", "1")...)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the refused backup wrote %d entries into the directory", len(ents))
	}
	wantFail(t, env, "does not have Object Lock enabled", repoBackupArgs(src, "s3://plain/db1", "--lock-days", "1")...)
	for oi := range c.ListObjects(ctx, "plain", minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("the refused backup wrote %s", oi.Key)
	}

	run := func(args ...string) string {
		t.Helper()
		r := ferry(t, env, args...)
		if r.err != nil {
			t.Fatalf("ferry %s failed: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
		}
		return r.stdout
	}
	older := strings.TrimSpace(run(repoBackupArgs(src, "s3://locked/db1", "--lock-days", "1", "--part-size", "1M")...))
	newer := strings.TrimSpace(run(repoBackupArgs(src, "s3://locked/db1", "--lock-days", "2", "--lock-mode", "compliance")...))
	m := lockedObjects(t, c, older, "GOVERNANCE", 24*time.Hour)
	lockedObjects(t, c, newer, "COMPLIANCE", 48*time.Hour)

	var listing struct {
		Backups []struct {
			ID          string    `json:"id"`
			LockMode    string    `json:"lock_mode"`
			LockedUntil time.Time `json:"locked_until"`
		} `json:"backups"`
	}
	if err := json.Unmarshal([]byte(run("list", "--repo", "s3://locked/db1", "--json")), &listing); err != nil {
		t.Fatal(err)
	}
	if len(listing.Backups) != 2 || listing.Backups[0].LockMode != "GOVERNANCE" || !listing.Backups[0].LockedUntil.Equal(m.Lock.RetainUntil) || listing.Backups[1].LockMode != "COMPLIANCE" {
		t.Errorf("list --json: %+v", listing.Backups)
	}

	out := run("expire", "--repo", "s3://locked/db1", "--keep-last", "1")
	want := "locked until " + m.Lock.RetainUntil.Format(time.RFC3339) + " (governance): it can go then"
	if !strings.Contains(out, "keep    "+older) || !strings.Contains(out, want) || strings.Contains(out, "delete ") {
		t.Errorf("expire --keep-last 1 printed:\n%s\nwant %s kept: %s", out, older, want)
	}
	key := "db1/backups/" + older + "/manifest.json"
	st, err := c.StatObject(ctx, "locked", key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("after expire: %v", err)
	}
	if err := c.RemoveObject(ctx, "locked", key, minio.RemoveObjectOptions{VersionID: st.VersionID}); err == nil {
		t.Errorf("the server deleted a locked version of %s", key)
	}

	out = run("verify", "--repo", "s3://locked/db1")
	if !strings.Contains(out, "Object Lock governance until "+m.Lock.RetainUntil.Format(time.RFC3339)) || !strings.Contains(out, "Object Lock compliance until") {
		t.Errorf("verify printed:\n%s\nwant each backup's lock", out)
	}
	// Someone allowed to bypass governance shortens the older backup's lock: verify
	// fails it.
	shorter, gov := time.Now().Add(time.Hour).UTC().Truncate(time.Second), minio.Governance
	if err := c.PutObjectRetention(ctx, "locked", key, minio.PutObjectRetentionOptions{Mode: &gov, RetainUntilDate: &shorter, GovernanceBypass: true}); err != nil {
		t.Fatal(err)
	}
	r := wantFail(t, env, "1 of 2 backups failed verification: "+older, "verify", "--repo", "s3://locked/db1")
	if !strings.Contains(r.stdout, "FAILED: backup "+older+": the object lock is weaker than recorded") || !strings.Contains(r.stdout, "(shortened)") {
		t.Errorf("verify of a shortened lock printed:\n%s", r.stdout)
	}
}

// lockedObjects checks that every object of backup id (read by HEAD: versitygw's
// GetObjectRetention answer does not parse) has retention mode until its manifest's
// date, about d from now, and returns the manifest.
func lockedObjects(t *testing.T, c *minio.Client, id, mode string, d time.Duration) *manifest.Manifest {
	t.Helper()
	ctx := context.Background()
	prefix := "db1/backups/" + id + "/"
	obj, err := c.GetObject(ctx, "locked", prefix+"manifest.json", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	var m manifest.Manifest
	if err := json.NewDecoder(obj).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Lock == nil || m.Lock.Mode != mode || time.Until(m.Lock.RetainUntil) > d+time.Second || time.Until(m.Lock.RetainUntil) < d-10*time.Minute {
		t.Fatalf("backup %s records lock %+v, want %s for %v", id, m.Lock, mode, d)
	}
	n := 0
	for oi := range c.ListObjects(ctx, "locked", minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		n++
		st, err := c.StatObject(ctx, "locked", oi.Key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		until, _ := time.Parse(time.RFC3339, st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
		if st.Metadata.Get("X-Amz-Object-Lock-Mode") != mode || !until.Equal(m.Lock.RetainUntil) {
			t.Errorf("%s: lock %q until %v, want %s until %v", oi.Key, st.Metadata.Get("X-Amz-Object-Lock-Mode"), until, mode, m.Lock.RetainUntil)
		}
	}
	if n != len(m.Objects)+1 {
		t.Errorf("backup %s: %d objects stored, want its %d and the manifest", id, n, len(m.Objects))
	}
	return &m
}
