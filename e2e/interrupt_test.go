package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestInterruptMatrix stops every backup end and every restore source with SIGINT,
// SIGTERM and SIGKILL at a point of its progress (the second file written, the first object,
// or with part of a stream read), then checks that the source is intact (the server's
// tables; the backup's files, or a repository's verify), that nothing is left but what
// the last line names, and that the next run (--resume for a repository) completes and
// restores the source's tables.
func TestInterruptMatrix(t *testing.T) {
	tmp := shortTemp(t)
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE shop")
	for i := range 4 {
		src.Exec(t, fmt.Sprintf("CREATE TABLE shop.t%d (id INT PRIMARY KEY, v CHAR(200)) ENGINE=InnoDB", i))
		src.Exec(t, fmt.Sprintf("INSERT INTO shop.t%d SELECT seq, MD5(seq) FROM shop.seq_1_to_5000", i))
	}
	want := testdb.Checksums(t, src.DB(t))
	full := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, full)...)
	stream := filepath.Join(tmp, "full.xbs")
	streamToFile(t, []string{"backup", "--socket", src.Socket, "--user", "root", "--stream", "--compress", "none"}, stream)
	repo := filepath.Join(tmp, "repo")
	dirRepoBackup(t, src, repo)
	sums := fileSums(t, full)
	signals := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL}
	n := 0
	fresh := func() string { n++; return filepath.Join(tmp, "out", fmt.Sprintf("data%d", n)) }
	os.MkdirAll(filepath.Join(tmp, "out"), 0o755)
	restored := func(datadir string, id uint32) {
		t.Helper()
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: id})
		compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
		s.Stop(t)
	}
	checkLast := func(sig syscall.Signal, err error, last string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%v: ferry exited 0", sig)
		}
		if sig != syscall.SIGKILL && (!strings.HasPrefix(last, "ferry: ") || strings.HasSuffix(last, "context canceled")) {
			t.Errorf("%v: last line %q is not ferry's one-line word on what happened", sig, last)
		}
	}

	for _, sig := range signals {
		t.Run("backup to a directory/"+sig.String(), func(t *testing.T) {
			target := filepath.Join(tmp, "bk-"+sig.String())
			cmd, log := pausedFerry(t, "backup-file=2", backupArgs(src, target, "--parallel", "1")...)
			err, last := signalled(t, cmd, log, sig)
			checkLast(sig, err, last)
			wantFail(t, nil, "", "restore", "--target-dir", target, "--datadir", fresh())
			compareChecksums(t, want, testdb.Checksums(t, src.DB(t)))
			mustFerry(t, backupArgs(src, target+"-next")...)
		})
		t.Run("backup to a repository/"+sig.String(), func(t *testing.T) {
			cmd, log := pausedFerry(t, "backup-file=2", "backup", "--socket", src.Socket, "--user", "root", "--repo", repo, "--parallel", "1")
			err, last := signalled(t, cmd, log, sig)
			checkLast(sig, err, last)
			mustFerry(t, "verify", "--repo", repo, "latest")
		})
		t.Run("restore from a directory/"+sig.String(), func(t *testing.T) {
			datadir := fresh()
			cmd, log := pausedFerry(t, "restore-file=2", "restore", "--target-dir", full, "--datadir", datadir, "--parallel", "1")
			err, last := signalled(t, cmd, log, sig)
			checkLast(sig, err, last)
			sameFiles(t, full, sums)
			if left := leftBeside(t, datadir); sig != syscall.SIGKILL && len(left) > 0 {
				t.Errorf("left %v", left)
			}
			mustFerry(t, "restore", "--target-dir", full, "--datadir", datadir)
			if left := leftBeside(t, datadir); len(left) > 0 {
				t.Errorf("the next run left %v", left)
			}
			if sig == syscall.SIGKILL {
				restored(datadir, 2)
			}
		})
		t.Run("restore from a stream/"+sig.String(), func(t *testing.T) {
			datadir := fresh()
			cmd := exec.Command(ferryBin, "restore", "--from", "-", "--datadir", datadir)
			in, _ := cmd.StdinPipe()
			logPath := filepath.Join(t.TempDir(), "ferry.log")
			logf, _ := os.Create(logPath)
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			f, _ := os.Open(stream)
			defer f.Close()
			fi, _ := f.Stat()
			io.CopyN(in, f, fi.Size()/3) // ferry waits for the rest
			staging := filepath.Join(filepath.Dir(datadir), fmt.Sprintf(".%s.ferry-staging-%d", filepath.Base(datadir), cmd.Process.Pid))
			waitFor(t, time.Minute, "the stream's first files", func() bool {
				ents, _ := os.ReadDir(staging)
				return len(ents) > 1
			})
			err, last := signalled(t, cmd, logPath, sig)
			in.Close()
			checkLast(sig, err, last)
			if left := leftBeside(t, datadir); sig != syscall.SIGKILL && len(left) > 0 {
				t.Errorf("left %v", left)
			}
			mustFerry(t, "restore", "--from", stream, "--datadir", datadir)
			if left := leftBeside(t, datadir); len(left) > 0 {
				t.Errorf("the next run left %v", left)
			}
			if sig == syscall.SIGKILL {
				restored(datadir, 3)
			}
		})
		t.Run("restore from a repository/"+sig.String(), func(t *testing.T) {
			datadir := fresh()
			args := []string{"restore", "--repo", repo, "latest", "--datadir", datadir, "--parallel", "1"}
			cmd, log := pausedFerry(t, "restore-object=1", args...) // a small backup is one object
			err, last := signalled(t, cmd, log, sig)
			checkLast(sig, err, last)
			if sig != syscall.SIGKILL && !strings.Contains(last, "--resume") {
				t.Errorf("the last line %q does not say how to continue", last)
			}
			mustFerry(t, "verify", "--repo", repo, "latest")
			r := mustFerry(t, append(args, "--resume")...)
			if !strings.Contains(r.stderr, "already") {
				t.Errorf("the resumed restore did not say what it had verified")
			}
			if left := leftBeside(t, datadir); len(left) > 0 {
				t.Errorf("the resumed run left %v", left)
			}
			if sig == syscall.SIGKILL {
				restored(datadir, 4)
			}
		})
	}
}
