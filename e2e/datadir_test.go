//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestDataDirectoryTables: tables and a partition created with DATA DIRECTORY, written
// during the backup, are in every backup (directory and stream) and come back: at
// their original path when it is free (refused with one line when not), elsewhere with
// --data-directory-map, inside the datadir with --no-data-directory. Prepare and
// restore never touch the source's tablespaces outside its datadir (their bytes and
// mtimes are the same before and after), and every restored copy holds the writer's
// invariant and the source's checksums.
func TestDataDirectoryTables(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	tmp := testdb.ShortDir(t)
	ext := filepath.Join(tmp, "ext")
	os.MkdirAll(ext, 0o777)
	// A 64 MiB redo log: mariadb-backup, run under the same writes for interop, failed
	// now and then on the default 8 MiB one ("Was only able to copy log from ...").
	src := testdb.Start(t, testdb.Options{ServerID: 1, LogFileSize: "64M"})
	src.Exec(t, "CREATE DATABASE dd")
	src.Exec(t, fmt.Sprintf("CREATE TABLE dd.acct (id INT PRIMARY KEY, a BIGINT, b BIGINT, pad CHAR(200)) ENGINE=InnoDB DATA DIRECTORY='%s'", ext))
	src.Exec(t, "INSERT INTO dd.acct SELECT seq, 1000, 1000, REPEAT('x', 200) FROM dd.seq_1_to_20000")
	src.Exec(t, fmt.Sprintf("CREATE TABLE dd.part (id INT PRIMARY KEY, v INT) ENGINE=InnoDB PARTITION BY HASH(id) (PARTITION p0 DATA DIRECTORY='%s', PARTITION p1)", ext))
	src.Exec(t, "INSERT INTO dd.part SELECT seq, 0 FROM dd.seq_1_to_5000")
	src.Exec(t, "CREATE TABLE dd.local (id INT PRIMARY KEY) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO dd.local SELECT seq FROM dd.seq_1_to_100")

	// The directory backup is taken under writes (checked by the invariant), the stream
	// of the idle server (checked against its checksums).
	stop := writeAccounts(t, src)
	dir := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, dir, "--max-rate", "10M")...)
	repoDir := filepath.Join(tmp, "repo")
	dirRepoBackup(t, src, repoDir)
	// mariadb-backup's backup under the same writes, for interop both ways.
	mbDir := filepath.Join(tmp, "mb")
	mariabackup(t, src, mbDir)
	// A clone under the same writes, its DATA DIRECTORY tablespaces sent elsewhere.
	cloned := filepath.Join(tmp, "data-clone")
	cloneOf(t, src, tmp, cloned, "--data-directory-map", ext+"="+filepath.Join(tmp, "ext7"))
	stop()
	if b, _ := os.ReadFile(filepath.Join(cloned, "dd", "acct.isl")); string(b) != filepath.Join(tmp, "ext7", "dd", "acct.ibd") {
		t.Errorf("the clone's dd/acct.isl holds %q", b)
	}
	stream := filepath.Join(tmp, "full.xbs")
	backupToFile(t, src, stream)
	// mariadb-backup prepares a copy of ferry's directory backup.
	mbPrepared := copyBackup(t, dir, filepath.Join(tmp, "ferry-mb-prepared"))
	if out, err := exec.Command("mariadb-backup", "--prepare", "--target-dir="+mbPrepared).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --prepare of a ferry backup with DATA DIRECTORY tables: %v\n%s", err, tail(string(out), 20))
	}
	if m := readManifest(t, dir); !hasRemote(m.Files, "dd/acct.ibd", filepath.Join(ext, "dd", "acct.ibd")) {
		t.Fatalf("the manifest does not record dd/acct.ibd with its DATA DIRECTORY path")
	}
	want := testdb.Checksums(t, src.DB(t), "dd")
	src.Stop(t) // from here nothing but ferry could change the source's files
	before := treeState(t, ext)
	checkNativeApply(t, dir) // before the checks that the source's DATA DIRECTORY files stay untouched

	t.Run("original path taken", func(t *testing.T) {
		datadir := filepath.Join(tmp, "never")
		wantFail(t, nil, "--data-directory-map", "restore", "--target-dir", dir, "--datadir", datadir)
		noDatadir(t, datadir)
		wantFail(t, nil, "dd.acct", "restore", "--from", stream, "--datadir", datadir)
		noDatadir(t, datadir)
		wantFail(t, nil, "--no-data-directory", "restore", "--repo", repoDir, "latest", "--datadir", datadir)
		noDatadir(t, datadir)
	})
	for _, c := range []struct {
		name string
		args []string
		ext  string // where the tablespaces must be; "" inside the datadir
		idle bool   // the backup of the idle source: its checksums must match
	}{
		{"map, directory", []string{"--target-dir", dir, "--data-directory-map", ext + "=" + filepath.Join(tmp, "ext2")}, filepath.Join(tmp, "ext2"), false},
		{"map, stream", []string{"--from", stream, "--data-directory-map", ext + "=" + filepath.Join(tmp, "ext3")}, filepath.Join(tmp, "ext3"), true},
		{"inside", []string{"--target-dir", dir, "--no-data-directory"}, "", false},
		{"clone", nil, filepath.Join(tmp, "ext7"), false},
		{"repository", []string{"--repo", repoDir, "latest", "--data-directory-map", ext + "=" + filepath.Join(tmp, "ext6")}, filepath.Join(tmp, "ext6"), false},
		{"mariadb-backup's backup", []string{"--target-dir", mbDir, "--data-directory-map", ext + "=" + filepath.Join(tmp, "ext4")}, filepath.Join(tmp, "ext4"), false},
		{"prepared by mariadb-backup", []string{"--target-dir", mbPrepared, "--data-directory-map", ext + "=" + filepath.Join(tmp, "ext5")}, filepath.Join(tmp, "ext5"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			datadir := filepath.Join(tmp, "data-"+strings.NewReplacer(", ", "-", " ", "-", "'", "").Replace(c.name))
			if c.args != nil {
				mustFerry(t, append([]string{"restore", "--datadir", datadir}, c.args...)...)
			}
			where := filepath.Join(datadir, "dd", "acct.ibd")
			if c.ext != "" {
				where = filepath.Join(c.ext, "dd", "acct.ibd")
				if b, _ := os.ReadFile(filepath.Join(datadir, "dd", "acct.isl")); string(b) != where {
					t.Errorf("dd/acct.isl holds %q, want %q", b, where)
				}
			}
			if _, err := os.Stat(where); err != nil {
				t.Fatalf("the tablespace is not at %s: %v", where, err)
			}
			rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
			checkAccounts(t, rep.DB(t))
			got := testdb.Checksums(t, rep.DB(t), "dd")
			if c.idle {
				compareChecksums(t, want, got)
			}
			rep.Stop(t)
			if after := treeState(t, ext); after != before {
				t.Fatalf("the source's DATA DIRECTORY changed during the restore:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// writeAccounts moves amounts between the rows of dd.acct (a + b stays 2000 in every
// row) and bumps dd.part until stopped.
func writeAccounts(t testing.TB, s *testdb.Server) func() {
	db := s.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i += 2 {
				db.ExecContext(ctx, "UPDATE dd.acct SET a = a + 1, b = b - 1 WHERE id BETWEEN ? AND ?", i%20000, i%20000+50)
				db.ExecContext(ctx, "UPDATE dd.part SET v = v + 1 WHERE id = ?", i%5000)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// checkAccounts checks dd.acct's invariant on a restored server.
func checkAccounts(t testing.TB, db *sql.DB) {
	t.Helper()
	var n, bad int
	if err := db.QueryRow("SELECT COUNT(*), SUM(a + b <> 2000) FROM dd.acct").Scan(&n, &bad); err != nil {
		t.Fatal(err)
	}
	if n != 20000 || bad != 0 {
		t.Fatalf("dd.acct: %d rows, %d break a + b = 2000", n, bad)
	}
}

func hasRemote(files []manifest.File, path, remote string) bool {
	for _, f := range files {
		if f.Path == path && f.Remote == remote {
			return true
		}
	}
	return false
}

// treeState is every file under dir with its size, mtime and SHA-256.
func treeState(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %s %x; ", p, fi.Size(), fi.ModTime().Format(time.RFC3339Nano), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
