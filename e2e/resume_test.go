//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestChainRestoreResumes: a restore of a chain (a full backup and two incrementals
// taken under the bank workload, from an S3 repository) is interrupted with SIGINT
// while the second incremental downloads; resumed, killed (SIGKILL) as it applies the
// second incremental; resumed, it starts the chain over from what verifies (the
// incrementals are not downloaded again) and is interrupted with SIGINT during crash
// recovery; resumed, it completes. Each SIGINT leaves only the staging directory its
// last line names (the incrementals' scratch directories are inside it) and says to
// run again with --resume; the first resumed run downloads no object verified before
// (the proxy counts the GETs), the last one none at all; the restored copy holds the
// bank's invariants at the chain's GTID and the source's checksums, and nothing else is
// left.
func TestChainRestoreResumes(t *testing.T) {
	t.Parallel()
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 20000)
	r := newS3Repo(t, "resume-chain", "db")
	load.Start()
	time.Sleep(500 * time.Millisecond)
	var ids []string
	for k := 0; k < 3; k++ {
		args := repoBackupArgs(src, r.url, "--part-size", "1M")
		if k > 0 {
			args = append(args, "--incremental")
		}
		if k == 2 {
			load.Stop(t) // the last link is taken at rest: the source's checksums are the chain's
		}
		ids = append(ids, strings.TrimSpace(r.run(t, args...).stdout))
		time.Sleep(500 * time.Millisecond)
	}
	want := testdb.Checksums(t, src.DB(t))
	total := 0
	for _, id := range ids {
		total += len(objectFiles(t, r, "db", id))
	}
	parent := testdb.ShortDir(t)
	datadir := filepath.Join(parent, "restored")
	staging := filepath.Join(parent, ".restored.ferry-restore-"+ids[0])
	args := []string{"restore", "--repo", r.url, ids[2], "--datadir", datadir, "--parallel", "1"}

	// 1. SIGINT once the second incremental has verified an object.
	r.proxy.Set(testdb.Faults{Delay: 400 * time.Millisecond, Only: "/objects/"})
	r.proxy.ResetGETs()
	cmd := startFerry(t, r.env, args...)
	waitGETs(t, r, "/resume-chain/db/backups/"+ids[2]+"/objects/", 2)
	interrupt(t, cmd, staging)
	verified := journaled(staging, "/resume-chain/db")
	if len(verified) == 0 || len(verified) >= total {
		t.Fatalf("%d of %d objects verified when interrupted: nothing to resume", len(verified), total)
	}
	wantFail(t, r.env, "--resume", args...)

	// 2. Resumed, and killed (SIGKILL) as it applies the second incremental.
	r.proxy.Set(testdb.Faults{})
	r.proxy.ResetGETs()
	cmd = startFerry(t, append(r.env, faultpoint.Env+"=chain-apply=2"), append(args, "--resume")...)
	log := waitForLog(t, cmd, "test pause at chain-apply=2")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !strings.Contains(log, "resume: the backup was already downloaded and verified") {
		t.Errorf("the resumed run did not take the full backup as verified:\n%s", tail(log, 30))
	}
	if fetched := refetched(t, r, verified); fetched > total-len(verified) {
		t.Errorf("the resumed run fetched %d objects; %d of %d were verified before", fetched, len(verified), total)
	}

	// 3. Resumed after an apply was cut: the chain starts over from what still verifies
	// against the full backup (the incrementals are not downloaded again); SIGINT once
	// crash recovery runs (the stock server's, which lasts long enough to be interrupted).
	r.proxy.ResetGETs()
	cmd = startFerry(t, r.env, append(args, "--resume", "--recovery", "server")...)
	log = waitForLog(t, cmd, "running crash recovery")
	interrupt(t, cmd, staging)
	if !strings.Contains(log, "an incremental was being applied when the restore stopped") {
		t.Errorf("the run resumed after an apply was cut does not say it starts the chain over:\n%s", tail(log, 30))
	}
	for path := range r.proxy.GETs() {
		if strings.Contains(path, "/"+ids[1]+"/objects/") || strings.Contains(path, "/"+ids[2]+"/objects/") {
			t.Errorf("the incrementals were kept, but %s was downloaded again", path)
		}
	}

	// 4. Resumed after recovery had started: nothing is downloaded, recovery runs again.
	r.proxy.ResetGETs()
	out := r.run(t, append(args, "--resume")...)
	if n := refetched(t, r, nil); n > 0 {
		t.Errorf("a run resumed after every link was applied downloaded %d objects", n)
	}
	if !strings.Contains(out.stderr, "every link applied") && !strings.Contains(out.stderr, "already applied") {
		t.Errorf("the last run does not say the chain was applied already:\n%s", tail(out.stderr, 20))
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 || ents[0].Name() != "restored" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("beside the datadir after the restore: %v, want only the datadir", names)
	}
	if hidden, _ := filepath.Glob(filepath.Join(datadir, ".ferry-*")); len(hidden) > 0 {
		t.Errorf("ferry's files left in the datadir: %v", hidden)
	}
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	load.Check(t, rep.DB(t), restoredGTID(t, out.stdout))
	compareChecksums(t, want, testdb.Checksums(t, rep.DB(t)))
}

// interrupt sends SIGINT to a running ferry restore and checks it failed with one line
// that names the staging directory and --resume, and left nothing else beside it.
func interrupt(t testing.TB, cmd *exec.Cmd, staging string) {
	t.Helper()
	interruptKeeps(t, cmd, staging, func(string) bool { return true })
}

// interruptKeeps is interrupt for a restore whose staging directory lies among other
// files: only the entries beside it that mine names must not be there.
func interruptKeeps(t testing.TB, cmd *exec.Cmd, staging string, mine func(name string) bool) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGINT)
	checkStagingKept(t, cmd, cmd.Wait(), staging, mine)
}

// checkStagingKept checks that the restore cmd, ended with err, failed with one line naming
// staging and --resume, and left nothing of its own (mine) beside staging.
func checkStagingKept(t testing.TB, cmd *exec.Cmd, err error, staging string, mine func(name string) bool) {
	t.Helper()
	b, _ := os.ReadFile(cmd.Stderr.(*os.File).Name())
	last := lastLine(string(b))
	if err == nil {
		t.Fatalf("the interrupted restore succeeded:\n%s", tail(string(b), 20))
	}
	if !strings.Contains(last, staging) || !strings.Contains(last, "--resume") {
		t.Errorf("the interrupted restore's last line does not name %s and --resume: %s", staging, last)
	}
	ents, _ := os.ReadDir(filepath.Dir(staging))
	for _, e := range ents {
		if e.Name() != filepath.Base(staging) && mine(e.Name()) {
			t.Errorf("the interrupted restore left %s beside its staging directory", e.Name())
		}
	}
}

// waitGETs waits until the proxy saw n requests for objects whose path starts with
// prefix: with one download at a time, the n-1 first are then written and verified.
func waitGETs(t testing.TB, r *s3Repo, prefix string, n int) {
	t.Helper()
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d downloads of %s", n, prefix), func() bool {
		seen := 0
		for path := range r.proxy.GETs() {
			if strings.HasPrefix(path, prefix) {
				seen++
			}
		}
		return seen >= n
	})
}

// journaled maps the GET path (below repoPath, "/bucket/prefix") of every object that
// the restore journals in staging (its own and its incrementals') record as verified.
func journaled(staging, repoPath string) map[string]bool {
	out := map[string]bool{}
	filepath.WalkDir(staging, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != ".ferry-restore.journal" {
			return nil
		}
		b, _ := os.ReadFile(p)
		id := strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "ferry restore journal of backup ")
		for _, obj := range journalObjects(p) {
			out[repoPath+"/backups/"+id+"/"+obj] = true
		}
		return nil
	})
	return out
}

// refetched counts the objects downloaded since the proxy's GETs were reset, and fails
// the test for each that verified held.
func refetched(t testing.TB, r *s3Repo, verified map[string]bool) int {
	t.Helper()
	n := 0
	for path, gets := range r.proxy.GETs() {
		if !strings.Contains(path, "/objects/") {
			continue
		}
		n++
		if verified[path] {
			t.Errorf("%s was verified before the interruption but downloaded again (%d GETs)", path, gets)
		}
	}
	return n
}

// journalObjects lists the objects a restore journal records as verified.
func journalObjects(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n")[1:] {
		if strings.HasPrefix(l, "objects/") {
			out = append(out, l)
		}
	}
	return out
}

// TestTableRestoreResumes: a table restore from an S3 repository into the running
// server (--tables --into-server), interrupted with SIGINT while it downloads, leaves
// only the staging directory its last line names; the same command with --resume
// downloads no object verified before and brings the table back with the backup's
// checksum, leaving nothing behind.
func TestTableRestoreResumes(t *testing.T) {
	t.Parallel()
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 20000)
	r := newS3Repo(t, "resume-tables", "db")
	load.Start()
	time.Sleep(500 * time.Millisecond)
	id := strings.TrimSpace(r.run(t, repoBackupArgs(src, r.url, "--part-size", "1M", "--compress", "none")...).stdout)
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t), "filler")["filler.t"] // filler.t is not written by the load
	parent := filepath.Dir(filepath.Clean(src.Datadir))
	staging := filepath.Join(parent, ".ferry-table-restore.ferry-restore-"+id)
	args := []string{"restore", "--repo", r.url, id, "--tables", "filler.t", "--into-server", "--rename-to", "t_back",
		"--socket", src.Socket, "--user", "root", "--parallel", "1"}

	r.proxy.Set(testdb.Faults{Delay: 400 * time.Millisecond, Only: "/objects/"})
	r.proxy.ResetGETs()
	cmd := startFerry(t, r.env, args...)
	waitGETs(t, r, "/resume-tables/db/backups/"+id+"/objects/", 3)
	interruptKeeps(t, cmd, staging, func(name string) bool { return strings.Contains(name, "ferry") })
	verified := journaled(staging, "/resume-tables/db")

	r.proxy.Set(testdb.Faults{})
	r.proxy.ResetGETs()
	out := r.run(t, append(args, "--resume")...)
	if n := refetched(t, r, verified); n == 0 {
		t.Errorf("the resumed run downloaded nothing: the interruption left nothing to do")
	}
	if !strings.Contains(out.stderr, "already_verified="+strconv.Itoa(len(verified))) {
		t.Errorf("the resumed run does not count the %d objects verified before:\n%s", len(verified), tail(out.stderr, 10))
	}
	if got := testdb.Checksums(t, src.DB(t), "filler")["filler.t_back"]; got != want {
		t.Errorf("filler.t_back checksum %q, the backup's filler.t %q", got, want)
	}
	leftovers(t, src)
	if _, err := os.Stat(staging); err == nil {
		t.Error("the staging directory is left after the table restore")
	}
}

// TestPointInTimeRestoreResumes: a point-in-time restore from an S3 repository and its
// binlog archive is interrupted with SIGINT while it downloads; resumed, killed with
// SIGKILL while the binlog replay runs (the server on the copy dies with ferry);
// resumed, the replay starts over and is interrupted with SIGINT; resumed, it goes on
// where it stopped. The first resumed run downloads no object verified before, the
// last none at all; the result holds the bank's invariants exactly at the target GTID
// (a transaction applied twice or skipped breaks them: a transfer's ledger rows and
// balances change together).
func TestPointInTimeRestoreResumes(t *testing.T) {
	t.Parallel()
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 20000)
	r := newS3Repo(t, "resume-pitr", "db")
	arch := startFerry(t, r.env, "binlog-archive", "--repo", r.url, "--socket", src.Socket, "--user", "root",
		"--compress", "none", "--flush-interval", "200ms", "--merge-every", "2s")
	load.Start()
	time.Sleep(500 * time.Millisecond)
	id := strings.TrimSpace(r.run(t, repoBackupArgs(src, r.url, "--part-size", "1M", "--compress", "none")...).stdout)
	time.Sleep(2 * time.Second)
	target := testdb.GTIDForDomain(src.QueryString(t, "SELECT @@gtid_binlog_pos"), 7)
	time.Sleep(300 * time.Millisecond)
	load.Stop(t)
	waitArchived(t, r, src)
	arch.Process.Signal(os.Interrupt)
	arch.Wait()

	parent := testdb.ShortDir(t)
	datadir := filepath.Join(parent, "pitr")
	args := []string{"restore", "--repo", r.url, "--to-gtid", target, "--datadir", datadir, "--parallel", "1"}
	staging := filepath.Join(parent, ".pitr.ferry-restore-"+id)
	r.proxy.Set(testdb.Faults{Delay: 400 * time.Millisecond, Only: "/objects/"})
	r.proxy.ResetGETs()
	cmd := startFerry(t, r.env, args...)
	waitGETs(t, r, "/resume-pitr/db/backups/"+id+"/objects/", 3)
	interrupt(t, cmd, staging)
	verified := journaled(staging, "/resume-pitr/db")

	r.proxy.Set(testdb.Faults{})
	r.proxy.ResetGETs()
	// 2. Resumed: the download goes on; SIGKILL once the replay runs. The server ferry
	// ran on the copy dies with it; the replay cannot be continued.
	cmd = startFerry(t, r.env, append(args, "--resume")...)
	waitForLog(t, cmd, "point-in-time: the applier runs")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	refetched(t, r, verified)
	waitFor(t, 10*time.Second, "the replay's server to die with ferry", func() bool { return !serverOn(staging) })

	// 3. Resumed: the replay starts over; SIGINT once it runs stops it cleanly.
	r.proxy.ResetGETs()
	cmd = startFerry(t, r.env, append(args, "--resume")...)
	log := waitForLog(t, cmd, "point-in-time: the applier runs")
	if !strings.Contains(log, "did not stop cleanly") {
		t.Errorf("the run resumed after the replay was killed does not say it starts over:\n%s", tail(log, 10))
	}
	interrupt(t, cmd, staging)
	if b, _ := os.ReadFile(cmd.Stderr.(*os.File).Name()); strings.Contains(string(b), "point-in-time: applied") {
		t.Log("the replay had finished when SIGINT came: the interruption did not cut it")
	}

	// 4. Resumed: the replay goes on where it stopped, nothing downloaded.
	r.proxy.ResetGETs()
	out := r.run(t, append(args, "--resume")...)
	if !strings.Contains(out.stderr, "goes on where it stopped") {
		t.Errorf("the run resumed after the replay was stopped does not continue it:\n%s", tail(out.stderr, 20))
	}
	if n := refetched(t, r, nil); n > 0 {
		t.Errorf("the run resumed during the replay downloaded %d objects", n)
	}
	checkPITR(t, load, datadir, target, out.stdout)
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("beside the datadir after the restore: %d entries, want the datadir alone", len(ents))
	}
}

// waitForLog waits until the log of ferry cmd holds want, and returns the log.
func waitForLog(t testing.TB, cmd *exec.Cmd, want string) string {
	t.Helper()
	var log string
	waitFor(t, 2*time.Minute, want, func() bool {
		b, _ := os.ReadFile(cmd.Stderr.(*os.File).Name())
		log = string(b)
		return strings.Contains(log, want)
	})
	return log
}

// serverOn tells whether a mariadbd runs on datadir (its command line names it).
func serverOn(datadir string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "--datadir="+datadir+"\x00") {
			return true
		}
	}
	return false
}

// checkPITR checks a point-in-time restore printed the target GTID and its datadir
// holds the bank's invariants there.
func checkPITR(t testing.TB, load *testdb.Workload, datadir, target, stdout string) {
	t.Helper()
	gtid := restoredGTID(t, stdout)
	if got := testdb.GTIDForDomain(gtid, 7); got != target {
		t.Fatalf("restore to %s says it ends at %s", target, gtid)
	}
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	load.Check(t, rep.DB(t), gtid)
	rep.Stop(t)
}
