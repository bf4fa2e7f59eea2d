package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestBackupUnderLoadIsConsistent takes a hot backup while a bank workload, writers
// to Aria/MyISAM/page_compressed tables and a DDL loop run, with a 4 MiB redo log that
// wraps several times during the (rate-limited) copy. The restored copy must satisfy
// the bank invariants, end exactly at the recorded GTID, pass the DDL and non-InnoDB
// checks, and, replicating from the recorded GTID, converge to the source's checksums.
func TestBackupUnderLoadIsConsistent(t *testing.T) {
	src := testdb.Start(t, testdb.Options{LogFileSize: "4M", ServerID: 1})
	db := src.DB(t)
	load := testdb.NewWorkload(t, db, 7, 4)
	testdb.CreateReplicationUser(t, src, "repl", "replpw")
	// ~60 MB of static rows, so that the rate-limited copy lasts long enough (~15 s) for
	// the workload's redo to wrap the 4 MiB log several times, however small the rest is.
	src.Exec(t, "CREATE DATABASE filler")
	src.Exec(t, "CREATE TABLE filler.t (id INT PRIMARY KEY, pad CHAR(240)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO filler.t SELECT seq, REPEAT('f', 240) FROM filler.seq_1_to_200000")

	load.Start()
	time.Sleep(time.Second) // the workload is running before the backup starts
	target := filepath.Join(shortTemp(t), "bk")
	mustFerry(t, backupArgs(src, target, "--max-rate", "5M", "--parallel", "2")...)
	time.Sleep(500 * time.Millisecond)
	load.Stop(t)

	m := readManifest(t, target)
	capacity := uint64(4<<20 - 12288)
	if m.LastLSN-m.StartLSN < 2*capacity {
		t.Fatalf("redo copied %d bytes, want > 2 laps of the %d-byte log: the test did not exercise wrapping", m.LastLSN-m.StartLSN, capacity)
	}
	t.Logf("redo %d..%d (%.1f laps), lock times %v, gtid %s", m.StartLSN, m.LastLSN,
		float64(m.LastLSN-m.StartLSN)/float64(capacity), m.LockTimesMS, m.Coordinates.GTIDBinlogPos)

	datadir := filepath.Join(shortTemp(t), "restored")
	out := mustFerry(t, "restore", "--target-dir", target, "--datadir", datadir)
	if !strings.Contains(out.stdout, "gtid_slave_pos = '"+m.Coordinates.GTIDBinlogPos+"'") {
		t.Errorf("restore did not print the replication statements for %s:\n%s", m.Coordinates.GTIDBinlogPos, out.stdout)
	}
	info, err := os.ReadFile(filepath.Join(datadir, "xtrabackup_info"))
	if err != nil || !strings.Contains(string(info), m.Coordinates.GTIDBinlogPos) {
		t.Errorf("restored datadir must keep xtrabackup_info with the GTID %s (err %v)", m.Coordinates.GTIDBinlogPos, err)
	}

	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	rdb := rep.DB(t)
	load.Check(t, rdb, m.Coordinates.GTIDBinlogPos)

	testdb.StartReplica(t, rep, src, m.Coordinates.GTIDBinlogPos, "repl", "replpw")
	testdb.WaitCaughtUp(t, rep, src, 2*time.Minute)
	compareChecksums(t, testdb.Checksums(t, db), testdb.Checksums(t, rdb))
}
