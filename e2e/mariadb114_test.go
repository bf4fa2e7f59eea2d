//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// basedir114 is MariaDB 11.4's installation for the tests; CI must have it (.ci/run
// unpacks it), elsewhere its tests skip.
func basedir114(t testing.TB) string {
	t.Helper()
	b := testdb.Basedir114()
	if b == "" {
		testdb.Missing(t, "MariaDB 11.4 is not installed (/opt/mariadb-11.4 or FERRY_MARIADB_114)", ".ci/run unpacks it from its Maven package")
	}
	return b
}

// TestMariaDB114: the ends that differ on MariaDB 11.4 LTS, under the bank, non-InnoDB
// and DDL workloads: a directory backup, a stream, an S3 repository with its binlog
// archive (the archiver restarted once), an incremental on the directory backup, and a
// clone. Each is restored with 11.4's mariadbd (and a point-in-time restore to a GTID
// of the load), started, checked by the bank's invariants at its GTID, made a replica
// of the source and compared table by table once caught up; a table is restored into
// the running server beside its original. A restore pointed at 10.11's mariadbd is
// refused before it writes anything.
func TestMariaDB114(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	base := basedir114(t)
	mariadbd := filepath.Join(base, "bin", "mariadbd")
	src, load := loadedSource(t, testdb.Options{ServerID: 1, Basedir: base}, 2, 20000)
	tmp := testdb.ShortDir(t)
	s3 := newS3Repo(t, "b114", "db1")
	// The binlog archiver follows 11.4's dump (it used to stop at the Gtid_list 11.4
	// sends when a dump starts in the middle of a file: restarted below).
	archive := func() *exec.Cmd {
		return startFerry(t, s3.env, "binlog-archive", "--repo", s3.url, "--socket", src.Socket, "--user", "root",
			"--compress", "none", "--flush-interval", "200ms", "--merge-every", "2s", "--retry-max", "1s")
	}
	arch := archive()
	load.Start()
	dir := filepath.Join(tmp, "dir")
	mustFerry(t, backupArgs(src, dir, "--max-rate", "16M")...)
	stream := filepath.Join(tmp, "full.xbs")
	streamToFile(t, streamArgs(src, "--max-rate", "16M"), stream)
	s3.run(t, repoBackupArgs(src, s3.url)...)
	arch.Process.Signal(os.Interrupt)
	arch.Wait()
	archive() // restarted: it resumes in the middle of a file
	time.Sleep(time.Second)
	mid := testdb.GTIDForDomain(src.QueryString(t, "SELECT @@gtid_binlog_pos"), 7)
	inc := filepath.Join(tmp, "inc")
	mustFerry(t, backupArgs(src, inc, "--incremental-basedir", dir)...)
	cloned := filepath.Join(tmp, "cloned")
	cloneGTID := clonedGTID(t, cloneOf(t, src, tmp, cloned, "--mariadbd", mariadbd).stdout)
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))
	waitArchived(t, s3, src)

	wantFail(t, nil, "is 10.11", "restore", "--target-dir", dir, "--datadir", filepath.Join(tmp, "wrong"), "--mariadbd", "/usr/sbin/mariadbd")
	if _, err := os.Stat(filepath.Join(tmp, "wrong")); err == nil {
		t.Error("a restore refused for the wrong mariadbd wrote its datadir")
	}
	// 11.4's mariadbd is named each of the ways a DBA can: found in /opt/mariadb-11.4 (where
	// CI puts it), its installation directory, mariadbd-11.4= in an option file, the binary.
	found := []string{"--mariadbd", base} // not installed where ferry looks
	if base == "/opt/mariadb-11.4" {
		found = nil
	}
	cnf := writeFile(t, tmp, "ferry.cnf", "[ferry]\nmariadbd-11.4="+mariadbd+"\n")
	for name, args := range map[string][]string{
		"dir":         append([]string{"--target-dir", dir}, found...),
		"stream":      {"--from", stream, "--mariadbd", base},
		"repo":        {"--repo", s3.url, "latest", "--defaults-file", cnf},
		"incremental": {"--target-dir", dir, "--incremental-dir", inc, "--mariadbd", mariadbd},
	} {
		t.Run(name, func(t *testing.T) {
			datadir := filepath.Join(tmp, "restored-"+name)
			out := s3.run(t, append(append([]string{"restore"}, args...), "--datadir", datadir)...)
			checkReplicaOn(t, base, src, load, datadir, restoredGTID(t, out.stdout), want)
		})
	}
	t.Run("point in time", func(t *testing.T) {
		datadir := filepath.Join(tmp, "to-gtid")
		out := s3.run(t, "restore", "--repo", s3.url, "--to-gtid", mid, "--datadir", datadir, "--mariadbd", mariadbd)
		gtid := restoredGTID(t, out.stdout)
		if got := testdb.GTIDForDomain(gtid, 7); got != mid {
			t.Fatalf("restore to %s says it ends at %s", mid, gtid)
		}
		checkReplicaOn(t, base, src, load, datadir, gtid, want)
	})
	t.Run("tables into the server", func(t *testing.T) {
		before := testdb.Checksums(t, src.DB(t))["bank.accounts"]
		mustFerry(t, "restore", "--target-dir", dir, "--tables", "bank.accounts", "--into-server", "--rename-to", "bank.accounts_back",
			"--socket", src.Socket, "--user", "root", "--mariadbd", mariadbd)
		var n int
		if err := src.DB(t).QueryRow("SELECT COUNT(*) FROM bank.accounts_back").Scan(&n); err != nil || n == 0 {
			t.Fatalf("bank.accounts_back: %d rows, %v", n, err)
		}
		if after := testdb.Checksums(t, src.DB(t))["bank.accounts"]; after != before {
			t.Errorf("restoring a copy beside bank.accounts changed it")
		}
	})
	t.Run("clone", func(t *testing.T) {
		checkReplicaOn(t, base, src, load, cloned, cloneGTID, want)
	})
}

// TestGaleraSST114: a Galera cluster of MariaDB 11.4 nodes (Debian's galera-4 library)
// takes a new node by a ferry SST while the bank's transfers run on the donor: the
// joiner applies the SST's redo natively with 11.4's mariadbd named in [sst], is
// Synced, holds every table the donor holds, and keeps the bank's invariants.
func TestGaleraSST114(t *testing.T) {
	base := basedir114(t)
	g := testdb.NewGalera(t, testdb.GaleraOptions{Nodes: 2, Ferry: ferryBin, Basedir: base,
		SST: []string{"mariadbd=" + filepath.Join(base, "bin", "mariadbd")}})
	n1 := g.Bootstrap(t)
	bank := testdb.NewBank(t, n1.DB(t), testdb.BankOptions{Accounts: 100, NoGTID: true, Cluster: true})
	n1.Exec(t, "CREATE DATABASE filler")
	n1.Exec(t, "CREATE TABLE filler.t (id INT PRIMARY KEY, pad CHAR(240)) ENGINE=InnoDB")
	n1.Exec(t, "INSERT INTO filler.t SELECT seq, REPEAT(MD5(seq), 7) FROM filler.seq_1_to_20000")
	load := startCommitLog(t, bank)
	g.Join(t, 1)
	log := g.Log(t, 1)
	if !strings.Contains(log, "ferry joiner: SST complete") || !strings.Contains(log, "redo applied natively") {
		t.Fatalf("n2 is Synced but its log shows no natively applied ferry SST:\n%s", tail(log, 30))
	}
	load.check(t, g, bank, 0)
	load.stop(t)
	g.WaitSynced(t, 1, time.Minute)
	waitSameSeqno(t, g)
	compareChecksums(t, testdb.Checksums(t, n1.DB(t)), testdb.Checksums(t, g.Nodes[1].DB(t)))
	bank.Check(t, g.Nodes[1].DB(t), "")
}
