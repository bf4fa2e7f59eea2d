//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestFreePagesAsHoles: most rows of a table are deleted and purged, then, while the
// bank workload runs, the table keeps churning during the backups (low ids deleted,
// new high ids inserted: pages freed and allocated while the copy reads them). A
// backup with the whole redo (--full-redo: the copy's own checkpoint is where the
// restore starts) and one at the defaults (whose three-stage copy runs a round only
// when the server's checkpoint moved enough meanwhile: logged) each store that
// table's free pages as holes (its copy is sparse, and the log counts them). The
// first restores with ferry's native apply alone (which refuses an all-zero page the
// redo does not build), the second with the stock server's recovery (which reports
// such a page corrupt); each holds the workload's invariants at the backup's GTID and
// replicates to the source's checksums. With --keep-free-pages the copy is not sparse.
func TestFreePagesAsHoles(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	tmp := testdb.ShortDir(t)
	src, load := loadedSource(t, testdb.Options{ServerID: 1, LogFileSize: "4M"}, 2, 5000)
	src.Exec(t, "CREATE DATABASE holes")
	src.Exec(t, "CREATE TABLE holes.t (id INT PRIMARY KEY, pad CHAR(240)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO holes.t SELECT seq, REPEAT(MD5(seq), 7) FROM holes.seq_1_to_40000")
	src.Exec(t, "DELETE FROM holes.t WHERE id <= 32000")
	// Purged before the load starts (under it the wait may never end), and flushed: the
	// descriptors on disk mark the pages free.
	src.Exec(t, "SET GLOBAL innodb_max_purge_lag_wait=0")
	flushTable(t, src.DB(t), "holes.t")
	load.Start()

	ctx, stop := context.WithCancel(context.Background())
	var churn sync.WaitGroup
	db := src.DB(t)
	churn.Go(func() { churnTable(ctx, t, db) })
	full := filepath.Join(tmp, "full")
	r := mustFerry(t, backupArgs(src, full, "--full-redo", "--max-rate", "32M")...)
	checkHoles(t, full, r.stderr, true)
	three := filepath.Join(tmp, "three")
	r = mustFerry(t, backupArgs(src, three, "--max-rate", "16M")...)
	checkHoles(t, three, r.stderr, true)
	t.Logf("three-stage copy: %s", lineWith(r.stderr, "recopy_rounds="))
	keep := filepath.Join(tmp, "keep")
	r = mustFerry(t, backupArgs(src, keep, "--keep-free-pages")...)
	checkHoles(t, keep, r.stderr, false)
	stop()
	churn.Wait()
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))

	for dir, recovery := range map[string]string{full: "native", three: "server"} {
		gtid := readManifest(t, dir).Coordinates.ReplicaGTID()
		datadir := filepath.Join(tmp, filepath.Base(dir)+"-data")
		mustFerry(t, "restore", "--target-dir", dir, "--datadir", datadir, "--recovery", recovery)
		checkReplica(t, src, load, datadir, gtid, want)
	}
}

// flushTable writes a table's dirty pages to its file (FLUSH TABLES ... FOR EXPORT,
// on one connection, released at once).
func flushTable(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{"FLUSH TABLES " + table + " FOR EXPORT", "UNLOCK TABLES"} {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// churnTable deletes the lowest ids of holes.t and inserts new ones above the highest,
// in small transactions, until ctx ends or it has done so 60 times (bounding what the
// restored copies replicate).
func churnTable(ctx context.Context, t *testing.T, db *sql.DB) {
	for next, low := 40001, 32001; ctx.Err() == nil && next < 40001+60*500; next, low = next+500, low+250 {
		stmts := []string{
			fmt.Sprintf("INSERT INTO holes.t SELECT seq, REPEAT(MD5(seq), 7) FROM holes.seq_%d_to_%d", next, next+499),
			fmt.Sprintf("DELETE FROM holes.t WHERE id < %d", low+250),
		}
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil && ctx.Err() == nil {
				t.Errorf("churn: %s: %v", q, err)
				return
			}
		}
	}
}

// checkHoles fails unless the backup's copy of holes/t.ibd is sparse (fewer blocks
// than its size) and the backup logged free pages, or, with want false, unless it is
// dense and logged none.
func checkHoles(t *testing.T, dir, stderr string, want bool) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, "holes", "t.ibd"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	sparse := st.Blocks*512 < fi.Size()
	v := after(stderr, "free_pages=")
	if i := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		v = v[:i]
	}
	n, _ := strconv.Atoi(v)
	t.Logf("%s: holes/t.ibd %d bytes, %d allocated; free_pages=%d", dir, fi.Size(), st.Blocks*512, n)
	if sparse != want || (n > 0) != want {
		t.Errorf("%s: holes/t.ibd sparse %v (%d of %d bytes allocated), %d free pages logged: want holes %v",
			dir, sparse, st.Blocks*512, fi.Size(), n, want)
	}
}
