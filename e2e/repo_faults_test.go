//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// loadNoise adds mixed tables and an incompressible table of about mb MiB, so that a
// repository backup has parts stored as objects of their own, not only packs.
func loadNoise(t testing.TB, s *testdb.Server, mb int) {
	t.Helper()
	loadMixed(t, s)
	s.Exec(t, "CREATE TABLE shop.noise (id INT PRIMARY KEY, b VARBINARY(1000)) ENGINE=InnoDB")
	s.Exec(t, "INSERT INTO shop.noise SELECT seq, RANDOM_BYTES(1000) FROM shop.seq_1_to_"+strconv.Itoa(mb*1000))
}

// TestRepoSurvivesFaults: 503 SlowDown bursts, connections cut mid-response and slow
// responses between ferry and the S3 server; backup, verify and restore all retry
// through them and the restored copy matches the source.
func TestRepoSurvivesFaults(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadNoise(t, src, 20)
	want := testdb.Checksums(t, src.DB(t))
	r := newS3Repo(t, "faulty", "db")
	r.proxy.Set(testdb.Faults{SlowDownEvery: 4, DropEvery: 7, Delay: 20 * time.Millisecond})
	id := strings.TrimSpace(r.run(t, repoBackupArgs(src, r.url, "--part-size", "4M")...).stdout)
	r.run(t, "verify", "--repo", r.url, id)
	datadir := filepath.Join(testdb.ShortDir(t), "restored")
	r.run(t, "restore", "--repo", r.url, id, "--datadir", datadir)
	st := r.proxy.Stats()
	t.Logf("proxy: %v", st)
	if st["slowdown"] < 5 || st["drop"] < 3 {
		t.Fatalf("too few faults injected to prove anything: %v", st)
	}
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	compareChecksums(t, want, testdb.Checksums(t, rep.DB(t)))
}

// objectFiles lists the object files of a backup on the S3 server's disk, largest
// first.
func objectFiles(t testing.TB, r *s3Repo, prefix, id string) []string {
	t.Helper()
	dir := r.srv.ObjectPath(r.bucket, prefix+"/backups/"+id+"/objects")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("objects of %s: %v", id, err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	sort.Slice(out, func(a, b int) bool { return fileSize(out[a]) > fileSize(out[b]) })
	return out
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// TestRepoDamagedObjectIsNamed: a byte flipped in a stored object makes verify and
// restore fail naming that object; restore creates no datadir.
func TestRepoDamagedObjectIsNamed(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadNoise(t, src, 10)
	r := newS3Repo(t, "damaged", "db")
	id := strings.TrimSpace(r.run(t, repoBackupArgs(src, r.url, "--part-size", "4M")...).stdout)
	objs := objectFiles(t, r, "db", id)
	victim := objs[0]
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(victim, b, 0o600); err != nil {
		t.Fatal(err)
	}
	name := "objects/" + filepath.Base(victim)
	wantFail(t, r.env, name, "verify", "--repo", r.url, id)
	datadir := filepath.Join(testdb.ShortDir(t), "never")
	res := wantFail(t, r.env, name, "restore", "--repo", r.url, id, "--datadir", datadir)
	if !strings.Contains(lastLine(res.stderr), "damaged") {
		t.Errorf("restore error does not say the object is damaged: %s", lastLine(res.stderr))
	}
	if _, err := os.Stat(datadir); err == nil {
		t.Fatal("a restore of a damaged backup created the datadir")
	}
}

// startFerry starts ferry in the background with env.
func startFerry(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(ferryBin, args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(t.TempDir(), "ferry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() { // a background ferry (serve, a killed backup) says what it saw
			b, _ := os.ReadFile(logf.Name())
			t.Logf("--- log of ferry %s ---\n%s", strings.Join(args, " "), tail(string(b), 40))
		}
	})
	return cmd
}

// waitFor polls cond every 50 ms for up to d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", d, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestRepoKilledBackupIsDebris: ferry killed with SIGKILL while uploading leaves a
// backup without manifest: list says incomplete (not restorable), restore refuses it,
// the earlier backup still verifies, and expire removes every object of the debris.
func TestRepoKilledBackupIsDebris(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadNoise(t, src, 20)
	r := newS3Repo(t, "killed", "db")
	good := strings.TrimSpace(r.run(t, repoBackupArgs(src, r.url, "--part-size", "2M")...).stdout)
	cmd := startFerry(t, r.env, repoBackupArgs(src, r.url, "--part-size", "2M", "--max-rate", "2M")...)
	backups := r.srv.ObjectPath(r.bucket, "db/backups")
	var killed string
	waitFor(t, time.Minute, "the second backup's first uploads", func() bool {
		ents, _ := os.ReadDir(backups)
		for _, e := range ents {
			if e.Name() != good {
				objs, _ := os.ReadDir(filepath.Join(backups, e.Name(), "objects"))
				if len(objs) >= 2 {
					killed = e.Name()
					return true
				}
			}
		}
		return false
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	if list := listRepo(t, r.env, r.url); len(list) != 1 || list[0].ID != good {
		t.Fatalf("list: %+v, want only the complete backup %s", list, good)
	}
	status := map[string]listedBackup{}
	for _, l := range listRepo(t, r.env, r.url, "--all") {
		status[l.ID] = l
	}
	if l := status[killed]; l.Status != "incomplete" || l.Restorable || l.Objects < 2 {
		t.Fatalf("killed backup listed as %+v, want incomplete with its objects", l)
	}
	if !status[good].Restorable {
		t.Fatalf("the complete backup is not restorable: %+v", status[good])
	}
	wantFail(t, r.env, "no such backup", "restore", "--repo", r.url, killed, "--datadir", filepath.Join(testdb.ShortDir(t), "x"))
	r.run(t, "verify", "--repo", r.url, "latest")
	out := r.run(t, "expire", "--repo", r.url, "--keep-last", "1")
	if !strings.Contains(out.stdout, "delete "+killed) || !strings.Contains(out.stdout, "keep    "+good) {
		t.Errorf("expire printed:\n%s", out.stdout)
	}
	if _, err := os.Stat(filepath.Join(backups, killed)); err == nil {
		left := 0
		filepath.WalkDir(filepath.Join(backups, killed), func(_ string, d os.DirEntry, _ error) error {
			if d != nil && !d.IsDir() {
				left++
			}
			return nil
		})
		if left > 0 {
			t.Fatalf("expire left %d objects of the killed backup", left)
		}
	}
	if list := listRepo(t, r.env, r.url, "--all"); len(list) != 1 || list[0].ID != good {
		t.Fatalf("after expire: %+v", list)
	}
	r.run(t, "verify", "--repo", r.url, good)
}

// TestRepoRestoreResumes: a restore killed with SIGKILL mid-download leaves its
// staging directory; without --resume a new restore refuses to start over it; with
// --resume it fetches only the objects not yet verified there, and the result matches
// the source.
func TestRepoRestoreResumes(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadNoise(t, src, 24)
	// The load's pages flushed and checkpointed: the backup then has no roll-forward, whose
	// patch parts a resumed restore always downloads again (on a busy machine the page
	// cleaner lagged, the backup rolled 421 pages forward, and the resume fetched their
	// object a second time).
	flushAndCheckpoint(t, src)
	want := testdb.Checksums(t, src.DB(t))
	r := newS3Repo(t, "resume", "db")
	id := strings.TrimSpace(r.run(t, repoBackupArgs(src, r.url, "--part-size", "2M")...).stdout)
	total := len(objectFiles(t, r, "db", id))
	datadir := filepath.Join(testdb.ShortDir(t), "restored")
	staging := filepath.Join(filepath.Dir(datadir), ".restored.ferry-restore-"+id)
	journal := filepath.Join(staging, ".ferry-restore.journal")

	r.proxy.Set(testdb.Faults{Delay: 300 * time.Millisecond, Only: "/objects/"})
	cmd := startFerry(t, r.env, "restore", "--repo", r.url, id, "--datadir", datadir, "--parallel", "2")
	var done []string
	waitFor(t, time.Minute, "a few objects restored", func() bool {
		b, _ := os.ReadFile(journal)
		done = strings.Split(strings.TrimSpace(string(b)), "\n")[1:]
		return len(done) >= 4
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	b, _ := os.ReadFile(journal)
	done = strings.Split(strings.TrimSpace(string(b)), "\n")[1:]
	if len(done) >= total {
		t.Fatalf("the restore finished all %d objects before it was killed: nothing to resume", total)
	}
	if _, err := os.Stat(datadir); err == nil {
		t.Fatal("a killed restore created the datadir")
	}

	r.proxy.Set(testdb.Faults{})
	wantFail(t, r.env, "--resume", "restore", "--repo", r.url, id, "--datadir", datadir)
	r.proxy.ResetGETs()
	res := r.run(t, "restore", "--repo", r.url, id, "--datadir", datadir, "--resume")
	gets := r.proxy.GETs()
	fetched := 0
	for path := range gets {
		if strings.Contains(path, "/objects/") {
			fetched++
		}
	}
	for _, obj := range done {
		if n := gets["/resume/db/backups/"+id+"/"+obj]; n > 0 {
			t.Errorf("%s was verified in staging but downloaded again (%d GETs)", obj, n)
		}
	}
	if fetched != total-len(done) {
		t.Errorf("the resumed restore fetched %d objects; %d of %d were already in staging", fetched, len(done), total)
	}
	if !strings.Contains(res.stderr, "already_verified="+strconv.Itoa(len(done))) {
		t.Errorf("the resumed restore did not report %d objects already verified:\n%s", len(done), tail(res.stderr, 10))
	}
	if _, err := os.Stat(staging); err == nil {
		t.Error("the staging directory is left after a successful restore")
	}
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	compareChecksums(t, want, testdb.Checksums(t, rep.DB(t)))
}
