//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestBackupResumes: repository backups under the bank workload are killed (SIGKILL)
// and resumed with backup --resume. On a directory repository: killed after its third
// upload, resumed and killed after some tablespaces, resumed and killed under
// BLOCK_COMMIT, then resumed to the end. On S3 behind the fault proxy: killed after its
// second upload, then resumed over a link that cuts every ninth connection. Every
// object an attempt stored is still there, unchanged, in the finished backup's
// manifest, and no later attempt sent it again (the proxy counts every PUT the server stored;
// the directory's objects keep their modification time); the last attempt reports
// what it kept and how much of it was still current; both backups verify, and each
// restores to a copy that holds the bank's invariants at its GTID and the source's
// checksums.
func TestBackupResumes(t *testing.T) {
	t.Parallel()
	src, load := loadedSource(t, testdb.Options{LogFileSize: "8M", ServerID: 1}, 2, 8000)
	loadNoise(t, src, 12)
	tmp := testdb.ShortDir(t)
	dir := filepath.Join(tmp, "repo")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	s3 := newS3Repo(t, "resume", "db")
	load.Start()
	time.Sleep(500 * time.Millisecond)
	args := func(url string) []string {
		return repoBackupArgs(src, url, "--part-size", "1M", "--max-rate", "6M", "--parallel", "2")
	}
	dirID := killedAt(t, nil, "repo-object=3", args(dir)...)
	before := objectsOf(t, filepath.Join(dir, "backups", dirID))
	killedAt(t, nil, "backup-file=4", append(args(dir), "--resume")...)
	killedAt(t, nil, "block-commit=1", append(args(dir), "--resume")...)
	mid := objectsOf(t, filepath.Join(dir, "backups", dirID))
	done := mustFerry(t, append(args(dir), "--resume")...)
	if id := strings.TrimSpace(done.stdout); id != dirID {
		t.Fatalf("the resumed backup printed id %q, want the interrupted one's %s", id, dirID)
	}
	checkResumeKept(t, done.stderr, len(mid))
	wantFail(t, nil, "nothing to resume", append(args(dir), "--resume")...)
	after := objectsOf(t, filepath.Join(dir, "backups", dirID))
	for _, set := range []map[string]objectStamp{before, mid} {
		for k, v := range set {
			if after[k] != v {
				t.Fatalf("object %s of an interrupted attempt changed or vanished: %+v, then %+v", k, v, after[k])
			}
		}
	}
	listed := manifestObjects(t, filepath.Join(dir, "backups", dirID, "manifest.json"))
	for k := range mid {
		if !listed["objects/"+k] {
			t.Fatalf("object %s of an interrupted attempt is not in the manifest", k)
		}
	}

	s3ID := killedAt(t, s3.env, "repo-object=2", args(s3.url)...)
	firstPUTs := s3.proxy.PUTs()
	s3.proxy.Set(testdb.Faults{DropEvery: 9, Only: "/objects/"})
	res := s3.run(t, append(args(s3.url), "--resume")...)
	s3.proxy.Set(testdb.Faults{})
	if id := strings.TrimSpace(res.stdout); id != s3ID {
		t.Fatalf("the resumed S3 backup printed id %q, want %s", id, s3ID)
	}
	stored := 0
	for path, n := range s3.proxy.PUTs() {
		if !strings.Contains(path, "/objects/") || firstPUTs[path] == 0 {
			continue
		}
		stored++
		if n != firstPUTs[path] {
			t.Fatalf("%s was stored again by the resumed backup (%d times in all)", path, n)
		}
	}
	if stored < 2 {
		t.Fatalf("the killed S3 attempt stored %d objects, want 2 or more", stored)
	}
	checkResumeKept(t, res.stderr, stored)
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))

	for _, c := range []struct{ name, url string }{{"directory", dir}, {"s3", s3.url}} {
		r := ferry(t, s3.env, "verify", "--repo", c.url, "latest")
		if r.err != nil {
			t.Fatalf("verify of the resumed %s backup: %v\n%s", c.name, r.err, r.stderr)
		}
		datadir := filepath.Join(tmp, "restored-"+c.name)
		rs := ferry(t, s3.env, "restore", "--repo", c.url, "latest", "--datadir", datadir)
		if rs.err != nil {
			t.Fatalf("restore of the resumed %s backup: %v\n%s", c.name, rs.err, rs.stderr)
		}
		checkReplica(t, src, load, datadir, restoredGTID(t, rs.stdout), want)
	}
}

// killedAt runs a backup that pauses at the test point pause, kills it there with
// SIGKILL and returns the id of the backup it left (the newest in the repository).
func killedAt(t *testing.T, env []string, pause string, args ...string) string {
	t.Helper()
	cmd := startFerry(t, append(env, "FERRY_TEST_PAUSE="+pause), args...)
	waitForLog(t, cmd, "test pause at "+pause)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	list := listRepo(t, env, repoArg(args), "--all")
	if len(list) == 0 || list[len(list)-1].Status != "incomplete" {
		t.Fatalf("after a kill at %s the repository lists %+v, want an incomplete backup", pause, list)
	}
	return list[len(list)-1].ID
}

// repoArg is the value of --repo in args.
func repoArg(args []string) string {
	for i, a := range args {
		if a == "--repo" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// objectStamp is what tells a stored object apart from one written again.
type objectStamp struct {
	size  int64
	mtime time.Time
}

// objectsOf lists a directory repository backup's objects.
func objectsOf(t *testing.T, backup string) map[string]objectStamp {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(backup, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]objectStamp{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = objectStamp{fi.Size(), fi.ModTime()}
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no object", backup)
	}
	return out
}

// manifestObjects is the set of object keys a manifest lists.
func manifestObjects(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`"key": "([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// checkResumeKept checks the resumed backup's report: it kept at least the objects the test
// saw stored, found some stored ranges still current, and uploaded less than it holds.
func checkResumeKept(t *testing.T, stderr string, atLeast int) {
	t.Helper()
	field := func(name string) int64 {
		m := regexp.MustCompile(`\b` + name + `=(\d+)`).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("the resumed backup did not report %s:\n%s", name, tail(stderr, 20))
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	if k := field("objects_kept"); k < int64(atLeast) {
		t.Errorf("the resumed backup kept %d objects, want %d or more", k, atLeast)
	}
	if field("held_bytes_current") == 0 {
		t.Errorf("the resumed backup found no stored range still current:\n%s", tail(stderr, 20))
	}
	if kept, up := field("stored_bytes_kept"), field("stored_bytes_uploaded"); kept <= 0 || up <= 0 {
		t.Errorf("the resumed backup kept %d bytes and uploaded %d", kept, up)
	}
}
