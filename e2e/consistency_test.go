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
	// ~60 MB of static rows, so that the rate-limited copy lasts long enough (~15 s) for
	// the workload's redo to wrap the 4 MiB log several times, however small the rest is.
	src, load := loadedSource(t, testdb.Options{LogFileSize: "4M", ServerID: 1}, 4, 200000)

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

	checkReplica(t, src, load, datadir, m.Coordinates.GTIDBinlogPos, testdb.Checksums(t, src.DB(t)))
}
