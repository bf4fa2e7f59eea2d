//go:build e2e

package repo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/minio/minio-go/v7"
)

// TestRepoObjectLockS3 runs locked backups against a real S3 server (versitygw) with a
// bucket created with Object Lock enabled: every object but the in-progress marker is
// stored with the retention the manifest records; the server refuses to delete a
// locked version, and Delete reports it (ErrLocked) and loses nothing; expire keeps the
// locked backup with its date and, once a lock has expired, deletes every version of
// the backup (nothing left in the bucket's versions); a lock shortened behind ferry's
// back is a mismatch; a bucket without Object Lock is refused before anything is
// written.
func TestRepoObjectLockS3(t *testing.T) {
	ctx := context.Background()
	srv := testdb.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	srv.MakeLockedBucket(t, "locked")
	srv.MakeLockedBucket(t, "offsite")
	srv.MakeBucket(t, "plain")
	open := func(url string) (storage.Storage, *repo.Repo) {
		st, err := storage.Open(ctx, storage.Config{URL: url, Retry: storage.RetryOptions{Attempts: 2}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := repo.Init(ctx, st, "test")
		if err != nil {
			t.Fatal(err)
		}
		return st, r
	}
	st, r := open("s3://locked/repo")
	l := storage.LockerOf(st)
	const long, short, newest = "20260101t000000z-long", "20260101t000001z-short", "20260101t000002z-newest"
	m1 := lockedBackup(t, r, long, 24*time.Hour, func(marker string) {
		if ret, err := l.Retention(ctx, marker); err != nil || !ret.IsZero() {
			t.Errorf("the in-progress marker has retention %+v (%v), want none: it must stay deletable", ret, err)
		}
	})
	if m1.Lock == nil || m1.Lock.Mode != "GOVERNANCE" || time.Until(m1.Lock.RetainUntil) < 23*time.Hour {
		t.Fatalf("the manifest records lock %+v, want governance for a day", m1.Lock)
	}
	checkRetained(t, st, l, m1)
	if err := r.CheckLock(ctx, m1, time.Now()); err != nil {
		t.Errorf("check of an intact lock: %v", err)
	}

	// The server refuses to delete a locked version; Delete says so and the backup
	// stays restorable.
	err := r.Delete(ctx, long)
	if !errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), m1.Lock.RetainUntil.Format(time.RFC3339)) {
		t.Fatalf("delete of a locked backup: %v, want ErrLocked with its date", err)
	}
	if _, err := r.Manifest(ctx, long); err != nil {
		t.Fatalf("after the refused delete: %v", err)
	}

	m2 := lockedBackup(t, r, short, 2*time.Second, nil)
	lockedBackup(t, r, newest, 0, nil)
	time.Sleep(time.Until(m2.Lock.RetainUntil) + 100*time.Millisecond)
	plan, err := r.PlanExpire(ctx, repo.Policy{KeepLast: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// newest is kept by the rule, long for its lock only; the lock of short has
	// expired: it goes, every version of its objects.
	if why := plan.Why(long); why != "locked until "+m1.Lock.RetainUntil.Format(time.RFC3339)+" (governance): it can go then" {
		t.Errorf("long kept for %q", why)
	}
	if len(plan.Expired) != 1 || plan.Expired[0].ID != short || len(plan.Keep) != 2 {
		t.Fatalf("plan keeps %d, lets go %+v; want short let go", len(plan.Keep), plan.Expired)
	}
	if err := r.Expire(ctx, plan, repo.ExpireOptions{}); err != nil {
		t.Fatalf("expire of a backup whose lock has expired: %v", err)
	}
	for v := range srv.Client(t).ListObjects(ctx, "locked", minio.ListObjectsOptions{Prefix: "repo/backups/" + short, Recursive: true, WithVersions: true}) {
		t.Errorf("after expire, version %s of %s is left (delete marker: %v, err %v)", v.VersionID, v.Key, v.IsDeleteMarker, v.Err)
	}

	// A copy keeps the lock where the target has Object Lock; elsewhere the copy is
	// not locked, and its check says so without failing.
	ost, or := open("s3://offsite/repo")
	if _, err := r.CopyTo(ctx, or, long, repo.CopyOptions{}); err != nil {
		t.Fatalf("copy to a locked bucket: %v", err)
	}
	checkRetained(t, ost, storage.LockerOf(ost), m1)
	if err := or.CheckLock(ctx, m1, time.Now()); err != nil {
		t.Errorf("check of the copied lock: %v", err)
	}
	_, plainCopy := open("s3://plain/copy")
	if _, err := r.CopyTo(ctx, plainCopy, long, repo.CopyOptions{}); err != nil {
		t.Fatalf("copy to a bucket without Object Lock: %v", err)
	}
	if err := plainCopy.CheckLock(ctx, m1, time.Now()); !errors.Is(err, repo.ErrLockNotHere) {
		t.Errorf("check of a locked backup's copy in a bucket without Object Lock: %v, want ErrLockNotHere", err)
	}

	// Someone with the bypass permission shortens the manifest's lock: verify's check
	// sees it.
	shorter := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	gov := minio.Governance
	if err := srv.Client(t).PutObjectRetention(ctx, "locked", "repo/"+repo.ObjectKey(long, "manifest.json"),
		minio.PutObjectRetentionOptions{Mode: &gov, RetainUntilDate: &shorter, GovernanceBypass: true}); err != nil {
		t.Fatalf("shorten the lock: %v", err)
	}
	if err := r.CheckLock(ctx, m1, time.Now()); !errors.Is(err, repo.ErrLockMismatch) || !strings.Contains(err.Error(), "shortened") {
		t.Errorf("check of a shortened lock: %v", err)
	}

	// A bucket without Object Lock: refused, nothing written.
	pst, pr := open("s3://plain/repo")
	_, err = pr.NewBackup(ctx, "20260101t000000z-plain", writerOptions(24*time.Hour))
	if err == nil || !strings.Contains(err.Error(), "does not have Object Lock enabled") {
		t.Fatalf("a locked backup into a bucket without Object Lock: %v", err)
	}
	if err := pst.List(ctx, "", func(oi storage.ObjectInfo) error { return errors.New("wrote " + oi.Key) }); err != nil {
		t.Fatal(err)
	}
}

func writerOptions(lock time.Duration) repo.WriterOptions {
	return repo.WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20, LockFor: lock}
}

// lockedBackup commits a small backup locked for d; during calls mid-backup with
// the key of its in-progress marker.
func lockedBackup(t *testing.T, r *repo.Repo, id string, d time.Duration, during func(marker string)) *manifest.Manifest {
	t.Helper()
	w, err := r.NewBackup(context.Background(), id, writerOptions(d))
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("backup " + id)
	f, _ := w.Create("xtrabackup_checkpoints")
	if err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(repo.ObjectKey(id, "in-progress.json"))
	}
	m := &manifest.Manifest{Format: 1, Type: manifest.TypeFull, EndTime: time.Now(), EndLSN: 100, Storage: manifest.Storage{Format: "repository"},
		Files: []manifest.File{{Path: "xtrabackup_checkpoints", Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data)), Kind: manifest.KindMeta}}}
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkRetained checks that every object of backup m (its manifest too) is stored
// with the retention the manifest records.
func checkRetained(t *testing.T, st storage.Storage, l storage.Locker, m *manifest.Manifest) {
	t.Helper()
	keys := []string{repo.ObjectKey(m.ID, "manifest.json")}
	for _, o := range m.Objects {
		keys = append(keys, repo.ObjectKey(m.ID, o.Key))
	}
	for _, k := range keys {
		ret, err := l.Retention(context.Background(), k)
		if err != nil || ret.Mode != storage.Governance || !ret.Until.Equal(m.Lock.RetainUntil) {
			t.Errorf("%s: retention %+v (%v), want governance until %s", k, ret, err, m.Lock.RetainUntil)
		}
	}
	n := 0
	_ = st.List(context.Background(), "backups/"+m.ID+"/", func(storage.ObjectInfo) error { n++; return nil })
	if n != len(keys) {
		t.Errorf("%d objects under the backup, want %d (its objects and manifest, no marker)", n, len(keys))
	}
}
