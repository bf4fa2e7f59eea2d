//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// loadMixed creates InnoDB, page_compressed InnoDB, ROW_FORMAT=COMPRESSED, Aria and
// MyISAM tables with data.
func loadMixed(t testing.TB, s *testdb.Server) {
	s.Exec(t, `CREATE DATABASE shop`)
	for _, q := range []string{
		`CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(200), qty INT) ENGINE=InnoDB`,
		`CREATE TABLE shop.archive (id INT PRIMARY KEY, note TEXT) ENGINE=InnoDB PAGE_COMPRESSED=1`,
		`CREATE TABLE shop.zipped (id INT PRIMARY KEY, note TEXT) ENGINE=InnoDB ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8`,
		`CREATE TABLE shop.aria (id INT PRIMARY KEY, note TEXT) ENGINE=Aria`,
		`CREATE TABLE shop.isam (id INT PRIMARY KEY, note TEXT) ENGINE=MyISAM`,
		`INSERT INTO shop.orders SELECT seq, REPEAT(CHAR(65 + seq % 26), 150), seq % 97 FROM shop.seq_1_to_30000`,
		`INSERT INTO shop.archive SELECT seq, REPEAT('archived order ', 40) FROM shop.seq_1_to_20000`,
		`INSERT INTO shop.zipped SELECT seq, REPEAT('zip ', 50) FROM shop.seq_1_to_5000`,
		`INSERT INTO shop.aria SELECT seq, MD5(seq) FROM shop.seq_1_to_5000`,
		`INSERT INTO shop.isam SELECT seq, SHA1(seq) FROM shop.seq_1_to_5000`,
	} {
		s.Exec(t, q)
	}
}

func isSparse(t testing.TB, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks*512 < fi.Size()
}

// TestInteropWithMariabackup proves both directions: mariadb-backup --prepare accepts a
// ferry backup, ferry prepare/restore accept a mariadb-backup backup, and both give
// the source's table checksums. It also checks prepare is idempotent, sparse files stay
// sparse and a new datadir is owned by the mysql user (else by its parent's owner).
func TestInteropWithMariabackup(t *testing.T) {
	mb, err := exec.LookPath("mariadb-backup")
	if err != nil {
		t.Fatal("mariadb-backup is not installed (apt-get install mariadb-backup; .ci/run does it)")
	}
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	want := testdb.Checksums(t, src.DB(t))
	tmp := testdb.ShortDir(t)

	t.Run("ferry backup, mariadb-backup prepare", func(t *testing.T) {
		dir := filepath.Join(tmp, "ferry-bk")
		mustFerry(t, backupArgs(src, dir)...)
		if !isSparse(t, filepath.Join(src.Datadir, "shop/archive.ibd")) {
			t.Log("source page_compressed file is not sparse on this filesystem")
		} else if !isSparse(t, filepath.Join(dir, "shop/archive.ibd")) {
			t.Error("the backup copy of a sparse page_compressed tablespace is not sparse")
		}
		// The redo of the load just before holds page_compressed and ROW_FORMAT=COMPRESSED
		// pages being written, which no backup under load has.
		checkNativeApply(t, dir)
		out, err := exec.Command(mb, "--prepare", "--target-dir="+dir).CombinedOutput()
		if err != nil {
			t.Fatalf("mariadb-backup --prepare rejected a ferry backup: %v\n%s", err, tail(string(out), 20))
		}
		datadir := filepath.Join(tmp, "from-mb-prepared")
		r := mustFerry(t, "restore", "--target-dir", dir, "--datadir", datadir)
		if !strings.Contains(r.stderr, "prepared by another tool") {
			t.Errorf("restore of a ferry backup prepared by mariadb-backup should warn that checksums cannot be checked")
		}
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 3})
		compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
	})

	t.Run("mariadb-backup backup, ferry prepare and restore", func(t *testing.T) {
		dir := filepath.Join(tmp, "mb-bk")
		out, err := exec.Command(mb, "--backup", "--socket="+src.Socket, "--user=root", "--target-dir="+dir).CombinedOutput()
		if err != nil {
			t.Fatalf("mariadb-backup --backup: %v\n%s", err, tail(string(out), 20))
		}
		mustFerry(t, "prepare", "--target-dir", dir)
		again := mustFerry(t, "prepare", "--target-dir", dir)
		if !strings.Contains(again.stderr, "already prepared") {
			t.Errorf("second prepare should report the backup already prepared:\n%s", again.stderr)
		}
		parent := filepath.Join(tmp, "owned")
		if err := os.Mkdir(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(parent, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		datadir := filepath.Join(parent, "data")
		mustFerry(t, "restore", "--target-dir", dir, "--datadir", datadir)
		fi, _ := os.Stat(filepath.Join(datadir, "shop", "orders.ibd"))
		wantUID := uint32(65534) // the datadir parent's owner, on a host without a mysql user
		if u, err := user.Lookup("mysql"); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			wantUID = uint32(uid) // the stock service's user (issue 22, finding 11)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != wantUID {
			t.Errorf("restored file owner uid %d, want %d", st.Uid, wantUID)
		}
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 4})
		compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
	})

	t.Run("ferry backup, ferry prepare, restore by copy and with --move", func(t *testing.T) {
		dir := filepath.Join(tmp, "ferry-bk2")
		mustFerry(t, backupArgs(src, dir)...)
		mustFerry(t, "prepare", "--target-dir", dir)
		copied := filepath.Join(tmp, "copied")
		mustFerry(t, "restore", "--target-dir", dir, "--datadir", copied)
		if isSparse(t, filepath.Join(dir, "shop/archive.ibd")) && !isSparse(t, filepath.Join(copied, "shop/archive.ibd")) {
			t.Error("restore did not keep the sparse page_compressed tablespace sparse")
		}
		s := testdb.Start(t, testdb.Options{Datadir: copied, ServerID: 6})
		compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
		datadir := filepath.Join(tmp, "moved")
		mustFerry(t, "restore", "--target-dir", dir, "--datadir", datadir, "--move")
		s = testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 5})
		compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
	})
}
