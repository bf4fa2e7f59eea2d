//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	target := filepath.Join(testdb.ShortDir(t), "bk")
	before := lsnNow(t, src)
	out := mustFerry(t, backupArgs(src, target, "--max-rate", "5M", "--parallel", "2")...)
	during := lsnNow(t, src) - before
	time.Sleep(500 * time.Millisecond)
	load.Stop(t)
	checkNativeApply(t, target)

	m := readManifest(t, target)
	capacity := uint64(4<<20 - 12288)
	if during < 2*capacity {
		t.Fatalf("the server wrote %d bytes of redo during the backup, want > 2 laps of the %d-byte log: the test did not exercise wrapping", during, capacity)
	}
	// The three-stage copy: the pages changed during the copy were copied again after
	// a checkpoint, and the backup keeps only the redo from there.
	rounds := recopyRounds(t, out.stderr)
	kept := m.LastLSN - m.StartLSN
	if rounds < 1 || kept > during/2 {
		t.Fatalf("%d re-copy rounds, %d bytes of redo kept of the %d written during the backup: the three-stage copy did not run", rounds, kept, during)
	}
	t.Logf("redo written during the backup %d (%.1f laps), kept %d after %d re-copy rounds, lock times %v, gtid %s", during,
		float64(during)/float64(capacity), kept, rounds, m.LockTimesMS, m.Coordinates.GTIDBinlogPos)

	datadir := filepath.Join(testdb.ShortDir(t), "restored")
	out = mustFerry(t, "restore", "--target-dir", target, "--datadir", datadir)
	if !strings.Contains(out.stdout, "gtid_slave_pos = '"+m.Coordinates.GTIDBinlogPos+"'") {
		t.Errorf("restore did not print the replication statements for %s:\n%s", m.Coordinates.GTIDBinlogPos, out.stdout)
	}
	info, err := os.ReadFile(filepath.Join(datadir, "xtrabackup_info"))
	if err != nil || !strings.Contains(string(info), m.Coordinates.GTIDBinlogPos) {
		t.Errorf("restored datadir must keep xtrabackup_info with the GTID %s (err %v)", m.Coordinates.GTIDBinlogPos, err)
	}

	checkReplica(t, src, load, datadir, m.Coordinates.GTIDBinlogPos, testdb.Checksums(t, src.DB(t)))
}

var roundsRe = regexp.MustCompile(`recopy_rounds=(\d+)`)

// recopyRounds is the number of three-stage re-copy rounds a backup's log reports.
func recopyRounds(t testing.TB, log string) int {
	t.Helper()
	m := roundsRe.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the backup log does not say how many re-copy rounds ran:\n%s", log)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
