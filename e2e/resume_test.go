package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestChainRestoreResumes: a restore of a chain (a full backup and two incrementals
// taken under the bank workload, from an S3 repository) is interrupted with SIGINT
// while the second incremental downloads, then again during crash recovery. Each
// interrupted run leaves only the staging directory its last line names (the
// incrementals' scratch directories are inside it) and says to run again with
// --resume; the resumed runs download no object that was verified before (the proxy
// counts the GETs), the last one none at all; the restored copy holds the bank's
// invariants at the chain's GTID and the source's checksums, and nothing else is left.
func TestChainRestoreResumes(t *testing.T) {
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
	parent := shortTemp(t)
	datadir := filepath.Join(parent, "restored")
	staging := filepath.Join(parent, ".restored.ferry-restore-"+ids[0])
	link2 := filepath.Join(staging, ".ferry-incremental-2", ".ferry-restore.journal")
	args := []string{"restore", "--repo", r.url, ids[2], "--datadir", datadir, "--parallel", "1"}

	// 1. SIGINT once the second incremental has verified an object.
	r.proxy.Set(testdb.Faults{Delay: 150 * time.Millisecond, Only: "/objects/"})
	r.proxy.ResetGETs()
	cmd := startFerry(t, r.env, args...)
	waitFor(t, 2*time.Minute, "the second incremental's first object", func() bool {
		return len(journalObjects(link2)) >= 1
	})
	interrupt(t, cmd, staging)
	verified := map[string]bool{}
	for k, id := range ids {
		j := filepath.Join(staging, ".ferry-restore.journal")
		if k > 0 {
			j = filepath.Join(staging, ".ferry-incremental-"+strconv.Itoa(k), ".ferry-restore.journal")
		}
		for _, obj := range journalObjects(j) {
			verified["/resume-chain/db/backups/"+id+"/"+obj] = true
		}
	}
	if len(verified) == 0 || len(verified) >= total {
		t.Fatalf("%d of %d objects verified when interrupted: nothing to resume", len(verified), total)
	}
	wantFail(t, r.env, "--resume", args...)

	// 2. Resumed, and interrupted again once crash recovery runs.
	r.proxy.Set(testdb.Faults{})
	r.proxy.ResetGETs()
	cmd = startFerry(t, r.env, append(args, "--resume")...)
	logPath := cmd.Stderr.(*os.File).Name()
	waitFor(t, 2*time.Minute, "crash recovery", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "running crash recovery")
	})
	interrupt(t, cmd, staging)
	log, _ := os.ReadFile(logPath)
	if !strings.Contains(string(log), "resume: the backup was already downloaded and verified") {
		t.Errorf("the resumed run did not take the full backup as verified:\n%s", tail(string(log), 30))
	}
	fetched := 0
	for path, n := range r.proxy.GETs() {
		if !strings.Contains(path, "/objects/") {
			continue
		}
		fetched++
		if verified[path] {
			t.Errorf("%s was verified before the interruption but downloaded again (%d GETs)", path, n)
		}
	}
	if fetched > total-len(verified) {
		t.Errorf("the resumed run fetched %d objects; %d of %d were verified before", fetched, len(verified), total)
	}

	// 3. Resumed after recovery had started: nothing is downloaded, recovery runs again.
	r.proxy.ResetGETs()
	out := r.run(t, append(args, "--resume")...)
	for path := range r.proxy.GETs() {
		if strings.Contains(path, "/objects/") {
			t.Errorf("a run resumed after every link was applied downloaded %s", path)
		}
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
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
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
		if e.Name() != filepath.Base(staging) {
			t.Errorf("the interrupted restore left %s beside its staging directory", e.Name())
		}
	}
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
