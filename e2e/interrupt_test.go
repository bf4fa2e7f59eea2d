//go:build e2e

package e2e

import (
	"context"
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

// interruptSignals are the ways a run is stopped from outside.
var interruptSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL}

// matrix is the state TestInterruptMatrix shares between its cases.
type matrix struct {
	t      *testing.T
	tmp    string
	src    *testdb.Server
	want   map[string]string
	full   string // a backup directory
	stream string // a stream file
	repo   string // a directory repository
	n      int
}

// datadir is a new datadir path for one run.
func (m *matrix) datadir() string {
	m.n++
	return filepath.Join(m.tmp, "out", fmt.Sprintf("data%d", m.n))
}

// checkLast fails unless a run stopped by sig exited non-zero and, when it could
// speak, ended with ferry's one line (never a bare "context canceled").
func checkLast(t testing.TB, sig syscall.Signal, err error, last string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%v: ferry exited 0", sig)
	}
	if sig != syscall.SIGKILL && (!strings.HasPrefix(last, "ferry: ") || strings.Contains(last, "context canceled")) {
		t.Errorf("%v: last line %q is not ferry's one-line word on what happened", sig, last)
	}
}

// serverFree fails unless the source commits within seconds: no lock of an interrupted
// backup is left on it. The row it writes is removed again (checksums stay).
func (m *matrix) serverFree(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := m.src.DB(t)
	for _, q := range []string{"INSERT INTO shop.probe VALUES (1)", "DELETE FROM shop.probe"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("the source does not commit after the interrupted backup: %v", err)
		}
	}
}

// restored starts a server on datadir and compares its tables with the source's.
func (m *matrix) restored(t testing.TB, datadir string) {
	t.Helper()
	s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 9})
	compareChecksums(t, m.want, testdb.Checksums(t, s.DB(t)))
	s.Stop(t)
}

// TestInterruptMatrix stops every backup end and every restore source with SIGINT,
// SIGTERM and SIGKILL at several points of its progress (a file or object written,
// BLOCK_COMMIT held, recovery starting, part of a stream read), and makes recovery
// fail, then checks that the source is intact (the server's tables and locks; the
// backup's files, or a repository's verify), that nothing is left but what the last line
// names, and that the next run (--resume for a repository) completes and restores the
// source's tables.
func TestInterruptMatrix(t *testing.T) {
	m := &matrix{t: t, tmp: testdb.ShortDir(t)}
	m.src = testdb.Start(t, testdb.Options{ServerID: 1})
	m.src.Exec(t, "CREATE DATABASE shop")
	m.src.Exec(t, "CREATE TABLE shop.probe (id INT PRIMARY KEY) ENGINE=InnoDB")
	for i := range 4 {
		m.src.Exec(t, fmt.Sprintf("CREATE TABLE shop.t%d (id INT PRIMARY KEY, v CHAR(200)) ENGINE=InnoDB", i))
		m.src.Exec(t, fmt.Sprintf("INSERT INTO shop.t%d SELECT seq, MD5(seq) FROM shop.seq_1_to_5000", i))
	}
	m.want = testdb.Checksums(t, m.src.DB(t))
	m.full = filepath.Join(m.tmp, "full")
	mustFerry(t, backupArgs(m.src, m.full)...)
	m.stream = filepath.Join(m.tmp, "full.xbs")
	streamToFile(t, []string{"backup", "--socket", m.src.Socket, "--user", "root", "--stream", "--compress", "none"}, m.stream)
	m.repo = filepath.Join(m.tmp, "repo")
	dirRepoBackup(t, m.src, m.repo)
	os.MkdirAll(filepath.Join(m.tmp, "out"), 0o755)
	t.Run("backup", m.backups)
	t.Run("restore", m.restores)
	t.Run("failed recovery", m.failedRecovery)
}

// backups interrupts a backup to a directory, a stream and a repository.
func (m *matrix) backups(t *testing.T) {
	conn := []string{"--socket", m.src.Socket, "--user", "root", "--parallel", "1"}
	for _, point := range []string{"backup-file=2", "block-commit=1"} {
		for _, sig := range interruptSignals {
			name := point + "/" + sig.String()
			t.Run("directory/"+name, func(t *testing.T) {
				target := filepath.Join(m.tmp, "bk-"+strings.ReplaceAll(name, "/", "-"))
				cmd, log := pausedFerry(t, point, append([]string{"backup", "--target-dir", target}, conn...)...)
				last, err := signalled(t, cmd, log, sig)
				checkLast(t, sig, err, last)
				m.serverFree(t)
				wantFail(t, nil, "incomplete", "restore", "--target-dir", target, "--datadir", m.datadir())
			})
			t.Run("stream/"+name, func(t *testing.T) {
				out := filepath.Join(m.tmp, "bk-"+strings.ReplaceAll(name, "/", "-")+".xbs")
				sh := fmt.Sprintf("exec %s backup --stream --compress none %s > %s", ferryBin, strings.Join(conn, " "), out)
				cmd, log := pausedFerry(t, point, "--sh", sh)
				last, err := signalled(t, cmd, log, sig)
				checkLast(t, sig, err, last)
				m.serverFree(t)
				datadir := m.datadir()
				wantFail(t, nil, "", "restore", "--from", out, "--datadir", datadir)
				if left := leftBeside(t, datadir); len(left) > 0 {
					t.Errorf("a restore of the cut stream left %v", left)
				}
			})
			t.Run("repository/"+name, func(t *testing.T) {
				cmd, log := pausedFerry(t, point, append([]string{"backup", "--repo", m.repo}, conn...)...)
				last, err := signalled(t, cmd, log, sig)
				checkLast(t, sig, err, last)
				m.serverFree(t)
			})
		}
	}
	// The next runs complete, and the interrupted ones never spoil the repository.
	mustFerry(t, backupArgs(m.src, filepath.Join(m.tmp, "bk-next"))...)
	mustFerry(t, "backup", "--socket", m.src.Socket, "--user", "root", "--repo", m.repo)
	mustFerry(t, "verify", "--repo", m.repo)
}

// restores interrupts a restore from a directory, a stream and a repository.
func (m *matrix) restores(t *testing.T) {
	sums := fileSums(t, m.full)
	for _, sig := range interruptSignals {
		for _, point := range []string{"restore-file=2", "recovery=1"} {
			t.Run("directory/"+point+"/"+sig.String(), func(t *testing.T) {
				datadir := m.datadir()
				args := []string{"restore", "--target-dir", m.full, "--datadir", datadir, "--parallel", "1"}
				cmd, log := pausedFerry(t, point, args...)
				last, err := signalled(t, cmd, log, sig)
				checkLast(t, sig, err, last)
				sameFiles(t, m.full, sums)
				if left := leftBeside(t, datadir); sig != syscall.SIGKILL && len(left) > 0 {
					t.Errorf("left %v", left)
				}
				m.next(t, sig, datadir, args)
			})
		}
		t.Run("stream file/recovery/"+sig.String(), func(t *testing.T) {
			datadir := m.datadir()
			args := []string{"restore", "--from", m.stream, "--datadir", datadir}
			cmd, log := pausedFerry(t, "recovery=1", args...)
			last, err := signalled(t, cmd, log, sig)
			checkLast(t, sig, err, last)
			m.next(t, sig, datadir, args)
		})
		t.Run("stream on stdin/"+sig.String(), func(t *testing.T) {
			datadir := m.datadir()
			m.cutStdin(t, sig, datadir)
			m.next(t, sig, datadir, []string{"restore", "--from", m.stream, "--datadir", datadir})
		})
		for _, point := range []string{"restore-object=1", "recovery=1"} { // a small backup is one object
			t.Run("repository/"+point+"/"+sig.String(), func(t *testing.T) {
				datadir := m.datadir()
				args := []string{"restore", "--repo", m.repo, "latest", "--datadir", datadir, "--parallel", "1"}
				cmd, log := pausedFerry(t, point, args...)
				last, err := signalled(t, cmd, log, sig)
				checkLast(t, sig, err, last)
				if sig != syscall.SIGKILL && !strings.Contains(last, "--resume") {
					t.Errorf("the last line %q does not say how to continue", last)
				}
				mustFerry(t, "verify", "--repo", m.repo, "latest")
				r := mustFerry(t, append(args, "--resume")...)
				if !strings.Contains(r.stderr, "already") {
					t.Errorf("the resumed restore did not say what it had")
				}
				if left := leftBeside(t, datadir); len(left) > 0 {
					t.Errorf("the resumed run left %v", left)
				}
				if sig == syscall.SIGKILL {
					m.restored(t, datadir)
				}
			})
		}
	}
}

// next runs a restore again after it was stopped by sig, and checks it completes and
// leaves nothing beside the datadir (after SIGKILL, the restored server too).
func (m *matrix) next(t *testing.T, sig syscall.Signal, datadir string, args []string) {
	t.Helper()
	mustFerry(t, args...)
	if left := leftBeside(t, datadir); len(left) > 0 {
		t.Errorf("the next run left %v", left)
	}
	if sig == syscall.SIGKILL {
		m.restored(t, datadir)
	}
}

// cutStdin feeds a third of the stream to a restore from stdin, waits for its first
// files, and stops it with sig while it waits for the rest.
func (m *matrix) cutStdin(t *testing.T, sig syscall.Signal, datadir string) {
	t.Helper()
	cmd := exec.Command(ferryBin, "restore", "--from", "-", "--datadir", datadir)
	in, _ := cmd.StdinPipe()
	logPath := filepath.Join(t.TempDir(), "ferry.log")
	logf, _ := os.Create(logPath)
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(m.stream)
	defer f.Close()
	fi, _ := f.Stat()
	io.CopyN(in, f, fi.Size()/3)
	staging := filepath.Join(filepath.Dir(datadir), fmt.Sprintf(".%s.ferry-staging-%d", filepath.Base(datadir), cmd.Process.Pid))
	waitFor(t, time.Minute, "the stream's first files", func() bool {
		ents, _ := os.ReadDir(staging)
		return len(ents) > 1
	})
	last, err := signalled(t, cmd, logPath, sig)
	in.Close()
	checkLast(t, sig, err, last)
	if left := leftBeside(t, datadir); sig != syscall.SIGKILL && len(left) > 0 {
		t.Errorf("left %v", left)
	}
}

// failedRecovery makes the recovery of each source fail (its mariadbd exits): the
// message is one line, a directory or stream restore leaves nothing, a repository
// restore keeps its staging directory, and the next run with a working mariadbd
// completes.
func (m *matrix) failedRecovery(t *testing.T) {
	fake := writeFile(t, m.tmp, "mariadbd-fails", "#!/bin/sh\ncase \"$*\" in *--version*) exec /usr/sbin/mariadbd \"$@\";; esac\nexit 1\n")
	os.Chmod(fake, 0o755)
	for _, c := range []struct {
		name, next string
		args       func(datadir string) []string
	}{
		{"directory", "", func(d string) []string { return []string{"restore", "--target-dir", m.full, "--datadir", d} }},
		{"stream", "", func(d string) []string { return []string{"restore", "--from", m.stream, "--datadir", d} }},
		{"repository", "--resume", func(d string) []string { return []string{"restore", "--repo", m.repo, "latest", "--datadir", d} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			datadir := m.datadir()
			r := wantFail(t, nil, "mariadbd exited during recovery", append(c.args(datadir), "--mariadbd", fake, "--recovery", "server")...)
			if c.next == "" && len(leftBeside(t, datadir)) > 0 {
				t.Errorf("a failed recovery left %v", leftBeside(t, datadir))
			}
			if c.next != "" && !strings.Contains(lastLine(r.stderr), c.next) {
				t.Errorf("the last line %q does not say %s", lastLine(r.stderr), c.next)
			}
			args := c.args(datadir)
			if c.next != "" {
				args = append(args, c.next)
			}
			mustFerry(t, args...)
			if left := leftBeside(t, datadir); len(left) > 0 {
				t.Errorf("the next run left %v", left)
			}
		})
	}
}
