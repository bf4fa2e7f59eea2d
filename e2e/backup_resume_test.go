//go:build e2e

package e2e

import (
	"fmt"
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

// TestBackupResumes: repository backups under the bank workload, on a directory and on
// S3 behind the fault proxy, are killed (SIGKILL) at three points and resumed with
// backup --resume each time: after their third upload; resumed and killed after some
// tablespaces; resumed and killed under BLOCK_COMMIT; resumed to the end (on S3 over a
// link that cuts every ninth upload, and told to check the kept ranges page by page
// instead of asking the redo log which pages changed). No object an attempt stored is ever written again
// (a directory's keep their size and modification time; the proxy counts how many
// times the S3 server stored each key) and every one is in the finished manifest; the
// last attempt keeps the backup's id and reports what it kept and how much of it was
// still current; a further --resume finds nothing to resume; both backups verify, and
// each restores to a copy that holds the bank's invariants at its GTID and the source's
// checksums. With the page-LSN check of the kept ranges disabled, the restores fail.
func TestBackupResumes(t *testing.T) {
	t.Parallel()
	src, load := loadedSource(t, testdb.Options{LogFileSize: "128M", ServerID: 1}, 2, 8000)
	loadNoise(t, src, 8)
	tmp := testdb.ShortDir(t)
	dir := filepath.Join(tmp, "repo")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	s3 := newS3Repo(t, "resume", "db")
	load.Start()
	time.Sleep(500 * time.Millisecond)
	args := func(url string) []string {
		return repoBackupArgs(src, url, "--part-size", "1M", "--max-rate", "20M", "--parallel", "2")
	}
	// stamps tells an object stored once from one written again: a directory object's
	// size and modification time; on S3, how many times the server stored its key.
	dirStamps := func(id string) map[string]string {
		out := map[string]string{}
		for k, v := range objectsOf(t, filepath.Join(dir, "backups", id)) {
			out["objects/"+k] = fmt.Sprint(v.size, v.mtime.UnixNano())
		}
		return out
	}
	s3Stamps := func(id string) map[string]string {
		out := map[string]string{}
		for path, n := range s3.proxy.PUTs() {
			if _, key, ok := strings.Cut(path, "/backups/"+id+"/"); ok && strings.HasPrefix(key, "objects/") {
				out[key] = strconv.Itoa(n)
			}
		}
		return out
	}
	for _, c := range []struct {
		name, url string
		env       []string
		stamps    func(id string) map[string]string
		manifest  func(id string) string // the path of its manifest file
	}{
		{"directory", dir, nil, dirStamps, func(id string) string { return filepath.Join(dir, "backups", id, "manifest.json") }},
		{"s3", s3.url, s3.env, s3Stamps, func(id string) string { return s3.srv.ObjectPath(s3.bucket, "db/backups/"+id+"/manifest.json") }},
	} {
		id := killedAt(t, c.env, "repo-object=3", args(c.url)...)
		seen := c.stamps(id)
		check := func(when string) {
			now := c.stamps(id)
			for k, v := range seen {
				if now[k] != v {
					t.Fatalf("%s: object %s of an interrupted attempt was written again or vanished %s (%s, then %s)", c.name, k, when, v, now[k])
				}
			}
			seen = now
		}
		killedAt(t, c.env, "backup-file=4", append(args(c.url), "--resume")...)
		check("by the second attempt")
		killedAt(t, c.env, "block-commit=1", append(args(c.url), "--resume")...)
		check("by the third attempt")
		env, path := c.env, "only the pages it names are read again"
		if c.env != nil { // the last attempt over a link that cuts every ninth upload, without the redo
			s3.proxy.Set(testdb.Faults{DropEvery: 9, Only: "/objects/"})
			env, path = append(c.env, "FERRY_TEST_FAIL=resume-redo"), "read again whole"
		}
		done := ferry(t, env, append(args(c.url), "--resume")...)
		s3.proxy.Set(testdb.Faults{})
		if done.err != nil {
			t.Fatalf("%s: the last resume failed: %v\n%s", c.name, done.err, tail(done.stderr, 20))
		}
		if !strings.Contains(done.stderr, path) {
			t.Errorf("%s: the last resume did not say the held ranges were %q:\n%s", c.name, path, tail(done.stderr, 20))
		}
		if got := strings.TrimSpace(done.stdout); got != id {
			t.Fatalf("%s: the resumed backup printed id %q, want the interrupted one's %s", c.name, got, id)
		}
		kept := len(seen)
		check("by the last attempt")
		checkResumeKept(t, done.stderr, kept)
		listed := manifestObjects(t, c.manifest(id))
		for k := range seen {
			if !listed[k] {
				t.Fatalf("%s: object %s is not in the manifest", c.name, k)
			}
		}
		wantFail(t, c.env, "nothing to resume", append(args(c.url), "--resume")...)
	}
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
		if strings.HasPrefix(e.Name(), ".ferry-tmp-") {
			continue // an upload the kill cut short: never listed, never an object
		}
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

// manifestObjects is the set of object keys the manifest file at path lists.
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
