//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/minio/minio-go/v7"
)

// TestCopyBetweenRepositories: a full backup and an incremental taken under the bank
// workload into a directory repository, with the binlog archive beside them, are
// copied to S3 by ferry copy. The first copy is killed with SIGKILL mid-way (list on
// the target shows the backup running while it pauses, incomplete once killed); the
// same command run again copies only what the target lacks: its summary counts the
// objects already there, and every object reached the server exactly once. A third
// run copies nothing. verify passes on the copy, and a restore from the copy holds
// the bank's invariants and the same tables as a restore from the original.
func TestCopyBetweenRepositories(t *testing.T) {
	t.Parallel()
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 10000)
	// Incompressible rows: the backups have objects of their own, not only packs.
	src.Exec(t, "CREATE TABLE filler.noise (id INT PRIMARY KEY, b VARBINARY(1000)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO filler.noise SELECT seq, RANDOM_BYTES(1000) FROM filler.seq_1_to_8000")
	tmp := testdb.ShortDir(t)
	dir := filepath.Join(tmp, "repo")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	arch := startFerry(t, nil, "binlog-archive", "--repo", dir, "--socket", src.Socket, "--user", "root", "--flush-interval", "200ms")
	load.Start()
	time.Sleep(time.Second)
	full := strings.TrimSpace(mustFerry(t, repoBackupArgs(src, dir, "--part-size", "1M")...).stdout)
	time.Sleep(time.Second)
	inc := strings.TrimSpace(mustFerry(t, repoBackupArgs(src, dir, "--part-size", "1M", "--incremental")...).stdout)
	load.Stop(t)
	time.Sleep(500 * time.Millisecond)
	arch.Process.Signal(syscall.SIGTERM)
	arch.Wait()
	objects, bytes := storedObjects(t, dir, full, inc)

	s3 := newS3Repo(t, "ferry-copy", "offsite")
	s3.proxy.Set(testdb.Faults{Delay: 100 * time.Millisecond, Only: "/objects/"})
	args := []string{"copy", "--from", dir, "--to", s3.url, "latest", "--parallel", "2"}
	cmd := startFerry(t, append(s3.env, faultpoint.Env+"=copy-object=4"), args...)
	waitForLog(t, cmd, "test pause at copy-object=4")
	if st := copyStatus(t, s3, full); st != "running" {
		t.Errorf("the backup being copied is listed %q in the target, want running", st)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if st := copyStatus(t, s3, full); st != "incomplete" {
		t.Errorf("the backup whose copy was killed is listed %q in the target, want incomplete", st)
	}
	// A PUT the proxy held back (its delay) may still reach the server after the kill.
	there, thereBytes := settled(t, s3, "offsite/backups/"+full+"/objects/")
	if there < 4 || there >= objects {
		t.Fatalf("%d of %d objects copied when killed: nothing to resume", there, objects)
	}

	s3.proxy.Set(testdb.Faults{})
	got := copySummary(t, s3.run(t, args...).stdout)
	if want := [4]int64{int64(objects - there), bytes - thereBytes, int64(there), thereBytes}; got != want {
		t.Errorf("the resumed copy copied %d objects (%d bytes) and found %d (%d bytes) there; want %v", got[0], got[1], got[2], got[3], want)
	}
	// No object was sent twice: the killed run's stored ones were skipped. (One the
	// killed run sent may have no successful PUT counted: its client was gone.)
	for path, n := range s3.proxy.PUTs() {
		if strings.Contains(path, "/objects/") || strings.Contains(path, "/binlogs/") || strings.Contains(path, "/binlog-gaps/") {
			if n != 1 {
				t.Errorf("%s was stored %d times", path, n)
			}
		}
	}
	n := 0
	for _, prefix := range []string{"offsite/backups/" + full + "/objects/", "offsite/backups/" + inc + "/objects/", "offsite/binlogs/", "offsite/binlog-gaps/"} {
		k, _ := s3Objects(t, s3, prefix)
		n += k
	}
	if n != objects {
		t.Errorf("the target holds %d objects, the source %d", n, objects)
	}
	if again := copySummary(t, s3.run(t, args...).stdout); again[0] != 0 || again[2] != int64(objects) {
		t.Errorf("a copy run again copied %d objects and found %d there; want 0 and %d", again[0], again[2], objects)
	}
	if list := listAll(t, s3.env, s3.url); len(list.Backups) != 2 || list.Archive == nil || list.Archive.Files == 0 {
		t.Errorf("the target lists %+v", list)
	}
	s3.run(t, "verify", "--repo", s3.url)

	sums := map[string]map[string]string{}
	for name, url := range map[string]string{"copy": s3.url, "original": dir} {
		datadir := filepath.Join(tmp, "restored-"+name)
		out := s3.run(t, "restore", "--repo", url, inc, "--datadir", datadir)
		rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
		load.Check(t, rep.DB(t), restoredGTID(t, out.stdout))
		sums[name] = testdb.Checksums(t, rep.DB(t))
		rep.Stop(t)
	}
	compareChecksums(t, sums["original"], sums["copy"])
}

// storedObjects counts the objects of backups ids in directory repository dir and of
// its binlog archive, and their bytes.
func storedObjects(t testing.TB, dir string, ids ...string) (n int, size int64) {
	t.Helper()
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join(dir, "backups", id, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m manifest.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		n, size = n+len(m.Objects), size+m.StoredSize()
	}
	for _, sub := range []string{"binlogs", "binlog-gaps"} {
		filepath.WalkDir(filepath.Join(dir, sub), func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				fi, _ := d.Info()
				n, size = n+1, size+fi.Size()
			}
			return nil
		})
	}
	if n == 0 {
		t.Fatal("the source repository holds no objects")
	}
	return n, size
}

// copyStatus is the status ferry list --all gives backup id in the target.
func copyStatus(t testing.TB, s3 *s3Repo, id string) string {
	t.Helper()
	for _, b := range listRepo(t, s3.env, s3.url, "--all") {
		if b.ID == id {
			return b.Status
		}
	}
	return "absent"
}

// s3Objects counts the objects under prefix in the S3 repository, and their bytes.
func s3Objects(t testing.TB, s3 *s3Repo, prefix string) (n int, size int64) {
	t.Helper()
	for o := range s3.srv.Client(t).ListObjects(context.Background(), s3.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		n, size = n+1, size+o.Size
	}
	return n, size
}

// settled counts the objects under prefix once two listings a moment apart agree.
func settled(t testing.TB, s3 *s3Repo, prefix string) (n int, size int64) {
	t.Helper()
	n, size = s3Objects(t, s3, prefix)
	for {
		time.Sleep(300 * time.Millisecond)
		m, msize := s3Objects(t, s3, prefix)
		if m == n {
			return n, size
		}
		n, size = m, msize
	}
}

var copyLine = regexp.MustCompile(`(\d+) objects copied, (\d+) bytes .*; (\d+) objects already there, (\d+) bytes`)

// copySummary reads ferry copy's summary: objects and bytes copied, objects and bytes
// already there.
func copySummary(t testing.TB, stdout string) [4]int64 {
	t.Helper()
	m := copyLine.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("ferry copy printed no summary:\n%s", stdout)
	}
	var out [4]int64
	for i := range out {
		out[i], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	return out
}
