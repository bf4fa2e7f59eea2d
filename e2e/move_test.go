//go:build e2e

package e2e

import (
	"hash/crc32"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// fileSums is every file of dir with its CRC-32C: a backup directory's bytes.
func fileSums(t testing.TB, dir string) map[string]uint32 {
	t.Helper()
	out := map[string]uint32{}
	tab := crc32.MakeTable(crc32.Castagnoli)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = crc32.Checksum(b, tab)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameFiles fails the test unless dir holds exactly the files of want, byte for byte.
func sameFiles(t testing.TB, dir string, want map[string]uint32) {
	t.Helper()
	got := fileSums(t, dir)
	for p, c := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s lost %s", dir, p)
		} else if g != c {
			t.Errorf("%s changed %s", dir, p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s gained %s", dir, p)
		}
	}
}

// pausedFerry starts ferry with the fault point pause (NAME=N, internal/faultpoint)
// and waits until it stops there; it returns the process and its log. With args
// "--sh", LINE, it runs the shell line (which must exec ferry) instead.
func pausedFerry(t testing.TB, pause string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "ferry.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ferryBin, args...)
	if len(args) == 2 && args[0] == "--sh" {
		cmd = exec.Command("sh", "-c", args[1])
	}
	cmd.Env = append(os.Environ(), "FERRY_TEST_PAUSE="+pause)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	waitFor(t, 2*time.Minute, "ferry to reach "+pause, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "test pause at "+pause)
	})
	return cmd, logPath
}

// signalled sends sig to a paused ferry and returns its last line and exit error.
func signalled(t testing.TB, cmd *exec.Cmd, logPath string, sig syscall.Signal) (string, error) {
	t.Helper()
	cmd.Process.Signal(sig)
	err := cmd.Wait()
	b, _ := os.ReadFile(logPath)
	if strings.Contains(string(b), "panic:") {
		t.Fatalf("ferry panicked:\n%s", b)
	}
	return lastLine(string(b)), err
}

// leftBeside lists what a restore into datadir left beside it (.DATADIR.ferry-*).
func leftBeside(t testing.TB, datadir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Dir(datadir))
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+filepath.Base(datadir)+".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestMoveKeepsTheBackup: restore --move interrupted (SIGINT, SIGTERM) while moving
// puts every file back, byte for byte; a failed recovery keeps the files in the
// staging directory the message names, and --resume finishes; SIGKILL while moving or
// during recovery leaves a marker that refuses any other use of the backup and a
// staging directory that --resume completes. The restored server holds the bank
// invariants at the backup's GTID and replicates to the source's checksums.
func TestMoveKeepsTheBackup(t *testing.T) {
	tmp := testdb.ShortDir(t)
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 4, 20000)
	load.Start()
	full := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, full)...)
	load.Stop(t)
	gtid := readManifest(t, full).Coordinates.ReplicaGTID()
	want := testdb.Checksums(t, src.DB(t))
	sums := fileSums(t, full)
	out := filepath.Join(tmp, "out")
	os.Mkdir(out, 0o755)
	datadir := filepath.Join(out, "data")
	move := []string{"restore", "--target-dir", full, "--datadir", datadir, "--move", "--parallel", "1"}

	// A table restore removes its copy once the tables are in: never from a --move.
	wantFail(t, nil, "--move does not apply to --tables", "restore", "--target-dir", full, "--move",
		"--tables", "bank.ledger", "--into-server", "--socket", src.Socket, "--user", "root")
	sameFiles(t, full, sums)

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd, log := pausedFerry(t, "restore-file=3", move...)
		last, err := signalled(t, cmd, log, sig)
		if err == nil || !strings.Contains(last, "the backup is whole") {
			t.Fatalf("%v while moving: exit %v, last line %q", sig, err, last)
		}
		sameFiles(t, full, sums)
		if left := leftBeside(t, datadir); len(left) > 0 {
			t.Fatalf("%v while moving left %v", sig, left)
		}
	}

	// A recovery that fails (its mariadbd exits) keeps the moved files in staging.
	fake := writeFile(t, tmp, "mariadbd-fails", "#!/bin/sh\ncase \"$*\" in *--version*) exec /usr/sbin/mariadbd \"$@\";; esac\nexit 1\n")
	os.Chmod(fake, 0o755)
	r := wantFail(t, nil, "--resume", append(move, "--mariadbd", fake, "--recovery", "server")...)
	if !strings.Contains(lastLine(r.stderr), "recovery had begun") {
		t.Fatalf("a failed recovery says %q", lastLine(r.stderr))
	}
	wantFail(t, nil, "--resume", "restore", "--target-dir", full, "--datadir", filepath.Join(out, "other"))
	wantFail(t, nil, "--resume", "prepare", "--target-dir", full)

	// SIGKILL during the second recovery, then --resume.
	cmd, log := pausedFerry(t, "recovery=1", append(move, "--resume")...)
	if _, err := signalled(t, cmd, log, syscall.SIGKILL); err == nil {
		t.Fatal("ferry survived SIGKILL")
	}
	r = mustFerry(t, append(move, "--resume")...)
	if left := leftBeside(t, datadir); len(left) > 0 {
		t.Errorf("the resumed restore left %v", left)
	}
	wantFail(t, nil, "consumed by restore --move", "restore", "--target-dir", full, "--datadir", filepath.Join(out, "other"))
	checkReplica(t, src, load, datadir, gtid, want)

	// SIGKILL while moving: the marker refuses a copy restore; --resume finishes.
	full2 := filepath.Join(tmp, "full2")
	mustFerry(t, backupArgs(src, full2)...)
	datadir2 := filepath.Join(out, "data2")
	move2 := []string{"restore", "--target-dir", full2, "--datadir", datadir2, "--move", "--parallel", "1"}
	cmd, log = pausedFerry(t, "restore-file=2", move2...)
	signalled(t, cmd, log, syscall.SIGKILL)
	wantFail(t, nil, "--resume", "restore", "--target-dir", full2, "--datadir", filepath.Join(out, "other"))
	wantFail(t, nil, "--resume", move2...)
	mustFerry(t, append(move2, "--resume")...)
	s := testdb.Start(t, testdb.Options{Datadir: datadir2, ServerID: 3})
	compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
	s.Stop(t)
}
