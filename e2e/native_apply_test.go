//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestNativeApply: a backup taken under the bank, mixed and DDL load is prepared by
// ferry's native redo apply (in batches of 1 MiB of records, --use-memory 1M); a run killed after a few pages and run again gives the
// same bytes as a run never interrupted; a record ferry refuses (injected) makes the
// restore fall back to the stock server's recovery with the reason logged, and
// --recovery native then fails in one line. Every restored copy starts and holds the
// workload's invariants at the backup's GTID, and replicates to the source's checksums.
func TestNativeApply(t *testing.T) {
	tmp := testdb.ShortDir(t)
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 4, 20000)
	load.Start()
	full := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, full, "--full-redo")...)
	load.Stop(t)
	gtid := readManifest(t, full).Coordinates.ReplicaGTID()
	want := testdb.Checksums(t, src.DB(t))
	copyOf := func(name string) string {
		dst := filepath.Join(tmp, name)
		if out, err := exec.Command("cp", "-a", full, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		return dst
	}
	whole, killed := copyOf("whole"), copyOf("killed")
	// --use-memory 1M: batches of 1 MiB of records, where the killed copy below is
	// applied in one; both give the same bytes.
	r := mustFerry(t, "prepare", "--target-dir", whole, "--recovery", "native", "--use-memory", "1M")
	if !strings.Contains(r.stderr, "redo applied natively") {
		t.Fatalf("prepare did not apply natively:\n%s", r.stderr)
	}
	if batches := after(r.stderr, "batches="); batches == "" || batches[0] == '1' && batches[1] == ' ' {
		t.Errorf("prepare --use-memory 1M applied the redo in one batch:\n%s", lineWith(r.stderr, "redo applied natively"))
	}
	cmd, log := pausedFerry(t, "apply-page=20", "prepare", "--target-dir", killed, "--recovery", "native")
	if _, err := signalled(t, cmd, log, syscall.SIGKILL); err == nil {
		t.Fatal("ferry survived SIGKILL")
	}
	mustFerry(t, "prepare", "--target-dir", killed, "--recovery", "native")
	sameInnoDB(t, whole, killed)

	out := filepath.Join(tmp, "out")
	os.Mkdir(out, 0o755)
	inject := []string{"FERRY_TEST_FAIL=apply-record"}
	wantFail(t, inject, "injected unknown record", "restore", "--target-dir", full, "--datadir", filepath.Join(out, "strict"), "--recovery", "native")
	datadir := filepath.Join(out, "data")
	r = ferry(t, inject, "restore", "--target-dir", full, "--datadir", datadir)
	if r.err != nil || !strings.Contains(r.stderr, fellBack) || !strings.Contains(r.stderr, "injected unknown record") {
		t.Fatalf("the restore did not fall back with the reason: %v\n%s", r.err, r.stderr)
	}
	checkReplica(t, src, load, datadir, gtid, want)
	native := filepath.Join(out, "native")
	mustFerry(t, "restore", "--target-dir", killed, "--datadir", native)
	checkReplica(t, src, load, native, gtid, want)
}

// sameInnoDB fails unless the InnoDB files (tablespaces and the redo log) of two
// prepared copies are equal byte for byte.
func sameInnoDB(t testing.TB, a, b string) {
	t.Helper()
	x, y := fileSums(t, a), fileSums(t, b)
	n := 0
	for p, c := range x {
		if !strings.HasSuffix(p, ".ibd") && !strings.HasPrefix(p, "ibdata") && !strings.HasPrefix(p, "undo") && p != "ib_logfile0" {
			continue
		}
		n++
		if y[p] != c {
			t.Errorf("%s differs between %s and %s", p, a, b)
		}
	}
	if n == 0 {
		t.Fatalf("no InnoDB file in %s", a)
	}
}
