//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestBadInput checks that each user mistake gets a one-line error, a non-zero exit
// and no panic.
func TestBadInput(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE USER weak@localhost IDENTIFIED BY 'weakpw'")
	src.Exec(t, "GRANT SELECT ON *.* TO weak@localhost")
	tmp := testdb.ShortDir(t)
	pw := filepath.Join(tmp, "pw")
	os.WriteFile(pw, []byte("wrong\n"), 0o600)
	weakpw := filepath.Join(tmp, "weakpw")
	os.WriteFile(weakpw, []byte("weakpw\n"), 0o600)

	t.Run("wrong credentials", func(t *testing.T) {
		r := wantFail(t, nil, "access denied for user \"root\"",
			"backup", "--socket", src.Socket, "--user", "root", "--password-file", pw, "--target-dir", filepath.Join(tmp, "a"))
		wantExit(t, r, 3) // refused by the server
		wantFail(t, []string{"MYSQL_PWD=nope"}, "access denied for user \"weak\"",
			"backup", "--socket", src.Socket, "--user", "weak", "--target-dir", filepath.Join(tmp, "a2"))
		if _, err := os.Stat(filepath.Join(tmp, "a")); !os.IsNotExist(err) {
			t.Error("a backup refused at connect time must not create its target directory")
		}
	})
	t.Run("server unreachable", func(t *testing.T) {
		r := wantFail(t, nil, "cannot connect to the server at socket /nonexistent.sock",
			"backup", "--socket", "/nonexistent.sock", "--target-dir", filepath.Join(tmp, "b"))
		wantExit(t, r, 3)
	})
	t.Run("missing privileges", func(t *testing.T) {
		r := wantFail(t, nil, "lacks privileges RELOAD, PROCESS, BINLOG MONITOR",
			"backup", "--socket", src.Socket, "--user", "weak", "--password-file", weakpw, "--target-dir", filepath.Join(tmp, "c"))
		wantExit(t, r, 3)
	})
	t.Run("target not empty", func(t *testing.T) {
		dir := filepath.Join(tmp, "full")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o644)
		wantFail(t, nil, "is not empty", backupArgs(src, dir)...)
		if b, _ := os.ReadFile(filepath.Join(dir, "keep")); string(b) != "x" {
			t.Error("ferry touched a file in a non-empty target directory")
		}
	})
	t.Run("stream options", func(t *testing.T) {
		r := wantFail(t, nil, "give one of --target-dir, --stream or --repo", streamArgs(src, "--target-dir", filepath.Join(tmp, "s1"))...)
		wantExit(t, r, 2) // usage
		wantFail(t, nil, "apply to --stream", backupArgs(src, filepath.Join(tmp, "s2"), "--compress", "zstd")...)
		wantFail(t, nil, "unknown compression \"brotli\"", streamArgs(src, "--compress", "brotli")...)
		wantFail(t, nil, "is not an age public key", streamArgs(src, "--encrypt-to", "age1notakey")...)
		wantFail(t, nil, "too small", streamArgs(src, "--max-memory", "1M")...)
		wantFail(t, nil, "give one of --target-dir, --from or --repo", "restore", "--from", "-", "--target-dir", tmp, "--datadir", filepath.Join(tmp, "s3"))
		wantFail(t, nil, "holds no valid age identity", "restore", "--from", pw, "--identity-file", pw, "--datadir", filepath.Join(tmp, "s4"))
		if _, err := os.Stat(filepath.Join(tmp, "s2")); !os.IsNotExist(err) {
			t.Error("a refused backup created its target directory")
		}
	})
	t.Run("not a backup", func(t *testing.T) {
		dir := filepath.Join(tmp, "junk")
		os.MkdirAll(dir, 0o755)
		wantFail(t, nil, "is not a complete backup", "prepare", "--target-dir", dir)
		wantFail(t, nil, "does not exist", "restore", "--target-dir", filepath.Join(tmp, "nope"), "--datadir", filepath.Join(tmp, "dd"))
	})
	t.Run("restore into non-empty datadir", func(t *testing.T) {
		bk := filepath.Join(tmp, "ok-bk")
		mustFerry(t, backupArgs(src, bk)...)
		dd := filepath.Join(tmp, "busy")
		os.MkdirAll(dd, 0o755)
		os.WriteFile(filepath.Join(dd, "ibdata1"), []byte("precious"), 0o644)
		wantFail(t, nil, "pass --replace", "restore", "--target-dir", bk, "--datadir", dd)
		if b, _ := os.ReadFile(filepath.Join(dd, "ibdata1")); string(b) != "precious" {
			t.Fatal("restore changed a non-empty datadir")
		}
		mustFerry(t, "restore", "--target-dir", bk, "--datadir", dd, "--replace")
		old, _ := filepath.Glob(dd + ".ferry-old-*")
		if len(old) != 1 {
			t.Fatalf("--replace must keep the old datadir aside, found %v", old)
		}
		if b, _ := os.ReadFile(filepath.Join(old[0], "ibdata1")); string(b) != "precious" {
			t.Fatal("the old datadir was not kept intact")
		}
	})
	t.Run("corrupt backup file", func(t *testing.T) {
		bk := filepath.Join(tmp, "corrupt-bk")
		r := mustFerry(t, append(backupArgs(src, bk), "--log-format", "json")...)
		if recs := jsonLines(t, r.stderr); !hasSeconds(recs) {
			t.Errorf("no duration in seconds (a _s key) in the backup's JSON log:\n%s", r.stderr)
		}
		f, err := os.OpenFile(filepath.Join(bk, "ibdata1"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte{0xde, 0xad}, 70000)
		f.Close()
		dd := filepath.Join(tmp, "from-corrupt")
		r = wantFail(t, nil, "backup file ibdata1 is corrupt", "restore", "--target-dir", bk, "--datadir", dd)
		wantExit(t, r, 4) // an integrity failure
		if _, err := os.Stat(dd); !os.IsNotExist(err) {
			t.Error("a failed restore left the datadir behind")
		}
		// With --log-format json every line is JSON, the error too, with its exit code.
		r = ferry(t, nil, "restore", "--target-dir", bk, "--datadir", dd, "--log-format", "json")
		wantExit(t, r, 4)
		recs := jsonLines(t, r.stderr)
		last := recs[len(recs)-1]
		if last["level"] != "ERROR" || last["exit_code"] != 4.0 || !strings.Contains(fmt.Sprint(last["msg"]), "backup file ibdata1 is corrupt") {
			t.Errorf("the last JSON line is %v", last)
		}
	})
}

// wantExit fails the test unless ferry's run r exited with code.
func wantExit(t testing.TB, r result, code int) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || ee.ExitCode() != code {
		t.Errorf("ferry exited with %v, want exit status %d", r.err, code)
	}
}

// jsonLines parses every line of a --log-format json run's stderr, failing the test on
// one that is not a JSON object.
func jsonLines(t testing.TB, stderr string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a line of --log-format json is not JSON (%v): %q", err, line)
		}
		recs = append(recs, rec)
	}
	return recs
}

// hasSeconds tells whether a record carries a duration as seconds: a number under a
// key ending in _s.
func hasSeconds(recs []map[string]any) bool {
	for _, rec := range recs {
		for k, v := range rec {
			if _, num := v.(float64); num && strings.HasSuffix(k, "_s") {
				return true
			}
		}
	}
	return false
}

// TestKilledBackupIsRefused kills ferry with SIGKILL mid-copy; the directory must be
// marked incomplete and refused by prepare and restore (and mariadb-backup).
func TestKilledBackupIsRefused(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	dir := filepath.Join(testdb.ShortDir(t), "killed")
	cmd := exec.Command(ferryBin, backupArgs(src, dir, "--max-rate", "1M")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "ibdata1"))
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err != nil {
		t.Fatalf("killed backup has no %s marker", manifest.IncompleteMarker)
	}
	wantFail(t, nil, "is incomplete", "prepare", "--target-dir", dir)
	wantFail(t, nil, "is incomplete", "restore", "--target-dir", dir, "--datadir", filepath.Join(t.TempDir(), "d"))
	if out, err := exec.Command("mariadb-backup", "--prepare", "--target-dir="+dir).CombinedOutput(); err == nil {
		t.Errorf("mariadb-backup --prepare accepted a killed ferry backup:\n%s", tail(string(out), 5))
	}
	// The server released the backup locks when ferry's connection died.
	done := make(chan struct{})
	go func() { src.Exec(t, "CREATE TABLE shop.after_kill (a INT)"); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("DDL still blocked after ferry was killed")
	}
}

// TestDiskFull: a full backup onto a tmpfs too small for the server's files is refused
// before anything is written (one line: needed, free, where); an incremental, whose size
// is known only as it is copied, fills the disk and fails with a clear message, its
// directory marked incomplete.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	mnt := testdb.ShortDir(t)
	mountTmpfs(t, mnt, "4m")
	dir := filepath.Join(mnt, "bk")
	wantFail(t, nil, "not enough free disk space", backupArgs(src, dir)...)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused backup created %s (%v)", dir, err)
	}
	base := filepath.Join(testdb.ShortDir(t), "base")
	mustFerry(t, backupArgs(src, base)...)
	src.Exec(t, "UPDATE shop.orders SET qty = qty + 1")
	src.Exec(t, "UPDATE shop.archive SET note = CONCAT(note, 'x')")
	inc := filepath.Join(mnt, "inc")
	wantFail(t, nil, "is full", backupArgs(src, inc, "--incremental-basedir", base)...)
	if _, err := os.Stat(filepath.Join(inc, manifest.IncompleteMarker)); err != nil {
		t.Errorf("partial backup on a full disk is not marked incomplete")
	}
}

// TestServerRestartDuringBackup restarts the server in the middle of a copy: the backup
// must fail with a clear message and stay marked incomplete, and a new backup after the
// restart must restore to the source's checksums.
func TestServerRestartDuringBackup(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	tmp := testdb.ShortDir(t)
	dir := filepath.Join(tmp, "interrupted")
	cmd := exec.Command(ferryBin, backupArgs(src, dir, "--max-rate", "2M")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "ibdata1"))
	src.Stop(t)
	src.Restart(t)
	err := cmd.Wait()
	last := lastLine(stderr.String())
	if err == nil || !strings.Contains(last, "lost the connection to the server") || strings.Contains(stderr.String(), "panic:") {
		t.Fatalf("backup across a server restart: err=%v, last line %q", err, last)
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err != nil {
		t.Fatal("interrupted backup is not marked incomplete")
	}
	want := testdb.Checksums(t, src.DB(t))
	again := filepath.Join(tmp, "after-restart")
	mustFerry(t, backupArgs(src, again)...)
	datadir := filepath.Join(tmp, "restored")
	mustFerry(t, "restore", "--target-dir", again, "--datadir", datadir)
	r := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	compareChecksums(t, want, testdb.Checksums(t, r.DB(t)))
}

// waitFile waits until path exists.
func waitFile(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCorruptSourcePageFailsBackup damages one page of a tablespace on disk (server
// stopped, so it is not cached): the backup must re-read it, then fail naming the file
// and page, and never report success.
func TestCorruptSourcePageFailsBackup(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	src.Stop(t)
	f, err := os.OpenFile(filepath.Join(src.Datadir, "shop", "orders.ibd"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("this page was damaged on disk"), 5*16384+2000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	src.Restart(t)
	dir := filepath.Join(testdb.ShortDir(t), "bk")
	r := wantFail(t, nil, "shop/orders.ibd: page 5 is corrupt", backupArgs(src, dir)...)
	if strings.Contains(r.stderr, "completed OK") {
		t.Fatal("backup reported success over a corrupt page")
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err != nil {
		t.Fatal("failed backup is not marked incomplete")
	}
}
