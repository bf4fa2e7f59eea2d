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

// isMountPoint tells whether dir is on another filesystem than its parent.
func isMountPoint(t testing.TB, dir string) bool {
	t.Helper()
	var d, p syscall.Stat_t
	if syscall.Stat(dir, &d) != nil || syscall.Stat(filepath.Dir(dir), &p) != nil {
		return false
	}
	return d.Dev != p.Dev
}

// TestRestoreIntoMountPoint: a datadir that is an empty tmpfs mount point, one that
// holds only lost+found, a --replace over a mounted datadir, and a clone into a mount
// point all restore; the datadir stays the mount point, the old contents are kept on
// its filesystem under a name the server never lists as a database (no #mysql50#), and
// each restored server has the source's checksums.
func TestRestoreIntoMountPoint(t *testing.T) {
	t.Parallel()
	tmp := testdb.ShortDir(t)
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY, v CHAR(200)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO shop.t SELECT seq, MD5(seq) FROM shop.seq_1_to_20000")
	full := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, full)...)
	want := testdb.Checksums(t, src.DB(t))
	datadir := filepath.Join(tmp, "mnt", "data")
	os.MkdirAll(datadir, 0o755)
	mountTmpfs(t, datadir, "400M")
	start := func(id uint32) *testdb.Server {
		t.Helper()
		if !isMountPoint(t, datadir) {
			t.Fatal("the datadir is no longer the mount point")
		}
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: id})
		compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
		var n int
		s.DB(t).QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE '#mysql50#%' AND SCHEMA_NAME <> '#mysql50#lost+found'").Scan(&n)
		if n > 0 { // lost+found is one unless ignore_db_dirs names it: the DBA's, not ferry's
			t.Errorf("the server sees %d #mysql50# databases", n)
		}
		return s
	}

	// An empty mount point.
	mustFerry(t, "restore", "--target-dir", full, "--datadir", datadir)
	start(2).Stop(t)

	// Over it with --replace: the old contents stay on the mount, hidden from the server.
	mustFerry(t, "restore", "--target-dir", full, "--datadir", datadir, "--replace")
	ents, _ := os.ReadDir(datadir)
	aside := ""
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "#sql-ferry-old-") {
			aside = filepath.Join(datadir, e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(aside, "ibdata1")); aside == "" || err != nil {
		t.Fatalf("the old datadir's files are not kept on the mount (%v): %v", err, ents)
	}
	start(3).Stop(t)

	// A fresh mount holding only lost+found.
	syscall.Unmount(datadir, syscall.MNT_DETACH)
	mountTmpfs(t, datadir, "400M")
	os.Mkdir(filepath.Join(datadir, "lost+found"), 0o700)
	mustFerry(t, "restore", "--target-dir", full, "--datadir", datadir)
	if _, err := os.Stat(filepath.Join(datadir, "lost+found")); err != nil {
		t.Errorf("lost+found is gone: %v", err)
	}
	if left := leftBeside(t, datadir); len(left) > 0 {
		t.Errorf("the restore left %v beside the mount point", left)
	}
	start(4).Stop(t)

	// A clone into a fresh mount point.
	syscall.Unmount(datadir, syscall.MNT_DETACH)
	mountTmpfs(t, datadir, "400M")
	cloneOf(t, src, tmp, datadir)
	start(5).Stop(t)
}

// TestRestoreChecksSpaceFirst: a restore into a filesystem too small for the backup and
// its recovery is refused before anything is written, in one line giving the need,
// what is free, and where.
func TestRestoreChecksSpaceFirst(t *testing.T) {
	t.Parallel()
	tmp := testdb.ShortDir(t)
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	full := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, full)...)
	small := filepath.Join(tmp, "small")
	os.Mkdir(small, 0o755)
	mountTmpfs(t, small, "24M")
	datadir := filepath.Join(small, "data")
	r := wantFail(t, nil, "not enough free disk space", "restore", "--target-dir", full, "--datadir", datadir)
	for _, w := range []string{"needed", "free", small} {
		if !strings.Contains(lastLine(r.stderr), w) {
			t.Errorf("the refusal %q does not say %q", lastLine(r.stderr), w)
		}
	}
	if ents, _ := os.ReadDir(small); len(ents) > 0 {
		t.Errorf("a refused restore wrote %v", ents)
	}
}

// TestNoSpaceEveryEnd: on a tmpfs too small for the backup, a repository restore (its
// size known) is refused before writing; a stream restore (its size unknown) stops with
// one line and leaves nothing; a backup into a directory repository there stops with
// one line, and the repository still verifies once it has room.
func TestNoSpaceEveryEnd(t *testing.T) {
	t.Parallel()
	tmp := testdb.ShortDir(t)
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY, v CHAR(200)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO shop.t SELECT seq, MD5(seq) FROM shop.seq_1_to_20000")
	stream := filepath.Join(tmp, "full.xbs")
	streamToFile(t, []string{"backup", "--socket", src.Socket, "--user", "root", "--stream", "--compress", "none"}, stream)
	repo := filepath.Join(tmp, "repo")
	dirRepoBackup(t, src, repo)
	small := filepath.Join(tmp, "small")
	os.Mkdir(small, 0o755)
	mountTmpfs(t, small, "24M")
	datadir := filepath.Join(small, "data")

	wantFail(t, nil, "not enough free disk space", "restore", "--repo", repo, "latest", "--datadir", datadir)
	if ents, _ := os.ReadDir(small); len(ents) > 0 {
		t.Errorf("a refused repository restore wrote %v", ents)
	}
	r := wantFail(t, nil, "", "restore", "--from", stream, "--datadir", datadir)
	if last := lastLine(r.stderr); !strings.Contains(last, "full") && !strings.Contains(last, "space") {
		t.Errorf("a stream restore on a full disk says %q", last)
	}
	if ents, _ := os.ReadDir(small); len(ents) > 0 {
		t.Errorf("a stream restore on a full disk left %v", ents)
	}

	smallRepo := filepath.Join(small, "repo")
	os.Mkdir(smallRepo, 0o755)
	mustFerry(t, "backup", "--socket", src.Socket, "--user", "root", "--repo", smallRepo)
	src.Exec(t, "CREATE TABLE shop.big (id INT PRIMARY KEY, v CHAR(250)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO shop.big SELECT seq, SHA2(seq, 256) FROM shop.seq_1_to_60000")
	r = wantFail(t, nil, "", "backup", "--socket", src.Socket, "--user", "root", "--repo", smallRepo, "--compress", "none")
	if last := lastLine(r.stderr); !strings.Contains(last, "full") && !strings.Contains(last, "space") {
		t.Errorf("a backup into a full repository says %q", last)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=256m", small).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
	mustFerry(t, "verify", "--repo", smallRepo)
	mustFerry(t, "backup", "--socket", src.Socket, "--user", "root", "--repo", smallRepo)
}
