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
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

var sourceGTIDRe = regexp.MustCompile(`SET GLOBAL gtid_slave_pos = '([^']*)';`)

// TestReplicaBackup: a backup of a replica taken under the source's bank, non-InnoDB and
// DDL load with --slave-info --safe-slave-backup records the replica's source and its
// gtid_slave_pos under BLOCK_COMMIT; restore --replicate-from-source turns it into a
// replica of the source (not of the replica): the bank's invariants hold at that
// position, it catches up and every table matches the source. A clone of the replica
// with --replicate-from-source replicates from the source as well.
func TestReplicaBackup(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{}, 4, 20000)
	rep := testdb.Start(t, testdb.Options{ServerID: 3})
	testdb.StartReplica(t, rep, src, "", "repl", "replpw")
	testdb.WaitCaughtUp(t, rep, src, 2*time.Minute)
	load.Start()
	time.Sleep(time.Second)

	tmp := testdb.ShortDir(t)
	bk := filepath.Join(tmp, "replica-backup")
	out := mustFerry(t, backupArgs(rep, bk, "--slave-info", "--safe-slave-backup", "--max-rate", "20M")...)
	if !strings.Contains(out.stderr, "SQL thread is stopped until BLOCK_COMMIT ends") {
		t.Errorf("--safe-slave-backup did not stop the SQL thread:\n%s", tail(out.stderr, 20))
	}
	if st := rep.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='SLAVE_RUNNING'"); st != "ON" {
		t.Errorf("the replica's threads are not running after the backup: Slave_running=%s", st)
	}
	m := readManifest(t, bk)
	c := m.Coordinates
	if len(c.Sources) != 1 || c.Sources[0].Host != "127.0.0.1" || c.Sources[0].Port != src.Port || c.GTIDSlavePos == "" {
		t.Fatalf("the manifest records sources %+v at gtid_slave_pos %q; want 127.0.0.1:%d", c.Sources, c.GTIDSlavePos, src.Port)
	}
	info, err := os.ReadFile(filepath.Join(bk, xtrabackup.SlaveInfoFile))
	if err != nil || !strings.Contains(string(info), "SET GLOBAL gtid_slave_pos = '"+c.GTIDSlavePos+"';\nCHANGE MASTER TO master_use_gtid = slave_pos;") {
		t.Errorf("%s: %v %q", xtrabackup.SlaveInfoFile, err, info)
	}

	// A backup of the source itself has no source to replicate from: refused before a
	// byte is restored.
	plain := filepath.Join(tmp, "source-backup")
	mustFerry(t, backupArgs(src, plain, "--slave-info")...)
	host, _ := os.Hostname()
	if ms := readManifest(t, plain).Server; ms.Port != src.Port || ms.Host != host { // the replica hint's
		t.Errorf("the manifest records the server at %s:%d, want %s:%d", ms.Host, ms.Port, host, src.Port)
	}
	wantFail(t, nil, "does not record a replication source", "restore", "--target-dir", plain, "--datadir", filepath.Join(tmp, "nope"), "--replicate-from-source")
	if _, err := os.Stat(filepath.Join(tmp, "nope")); err == nil {
		t.Error("a refused restore created its datadir")
	}

	datadir := filepath.Join(tmp, "restored")
	res := mustFerry(t, "restore", "--target-dir", bk, "--datadir", datadir, "--replicate-from-source").stdout
	if !strings.Contains(res, "MASTER_HOST='127.0.0.1', MASTER_PORT="+strconv.Itoa(src.Port)) {
		t.Fatalf("restore --replicate-from-source does not point at the source:\n%s", res)
	}
	g := sourceGTIDRe.FindStringSubmatch(res)
	if g == nil || g[1] != c.GTIDSlavePos {
		t.Fatalf("restore printed %q, want gtid_slave_pos %s:\n%s", g, c.GTIDSlavePos, res)
	}

	pw := writeFile(t, tmp, "repl.pw", "replpw\n")
	rcpt := testdb.Configure(t, testdb.Options{ServerID: 4})
	cl := cloneOf(t, rep, tmp, rcpt.Datadir, "--defaults-file", rcpt.ConfigFile, "--max-rate", "20M", "--start", "--replicate",
		"--replicate-from-source", "--repl-user", "repl", "--repl-password-file", pw)
	rcpt.Adopt(t)
	if !strings.Contains(cl.stdout, "Replicating from 127.0.0.1:"+strconv.Itoa(src.Port)) {
		t.Fatalf("the clone of the replica does not replicate from the source:\n%s", cl.stdout)
	}

	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))
	checkReplica(t, src, load, datadir, c.GTIDSlavePos, want)
	testdb.WaitCaughtUp(t, rcpt, src, 2*time.Minute)
	compareChecksums(t, want, testdb.Checksums(t, rcpt.DB(t)))
	load.Check(t, rcpt.DB(t), src.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos"))
	t.Logf("replica backup at gtid_slave_pos %s restored and cloned as replicas of the source", c.GTIDSlavePos)
}
