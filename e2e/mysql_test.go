//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// mysqlSource is a MySQL 8.0 server under the bank's transfers (its own GTID UUID, a
// gap-free ledger), a filler table rewritten in a loop (redo to spare: the server's
// redo capacity is 8M), and the backup user ferry logs in as, over TCP with the
// minimum grants (testdb.MySQLBackupGrants).
type mysqlSource struct {
	srv    *testdb.Server
	db     *sql.DB
	bank   *testdb.Bank
	pwFile string
	stop   func()
	wg     sync.WaitGroup
}

func startMySQLSource(t *testing.T) *mysqlSource {
	t.Helper()
	testdb.NeedMySQL80(t)
	src := testdb.StartMySQL(t, testdb.MySQLOptions{ServerID: 1})
	testdb.MySQLBackupUser(t, src, "bk", "bkpw")
	testdb.CreateReplicationUser(t, src, "repl", "replpw")
	s := &mysqlSource{srv: src, db: src.DB(t), pwFile: writeFile(t, t.TempDir(), "pw", "bkpw\n")}
	s.bank = testdb.NewBank(t, src.DB(t), testdb.BankOptions{Accounts: 100})
	fill(t, src.DB(t), 20000)
	return s
}

// fill makes filler.t, rows rows of 240 bytes.
func fill(t *testing.T, db *sql.DB, rows int) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"CREATE DATABASE filler", "CREATE TABLE filler.t (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0, pad CHAR(240)) ENGINE=InnoDB",
		"SET SESSION cte_max_recursion_depth = 1000000",
		fmt.Sprintf("INSERT INTO filler.t (id, pad) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s WHERE n < %d) SELECT n, REPEAT(MD5(n), 7) FROM s", rows)} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// startLoad runs the bank (3 threads) and two writers that rewrite filler.t.
func (s *mysqlSource) startLoad(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	db := s.srv.DB(t)
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		if err := s.bank.Run(ctx, 3); err != nil {
			t.Errorf("bank: %v", err)
		}
	}()
	for w := range 2 {
		go s.writeFiller(ctx, t, db, w)
	}
}

// writeFiller rewrites filler.t in batches of 2000 rows, starting at batch first, until
// ctx ends. A statement is not cancelled mid-way: a cancelled UPDATE may still commit
// after the test took the source's checksums.
func (s *mysqlSource) writeFiller(ctx context.Context, t *testing.T, db *sql.DB, first int) {
	defer s.wg.Done()
	for i := first * 5; ctx.Err() == nil; i++ {
		lo := (i * 2000) % 20000
		if _, err := db.Exec("UPDATE filler.t SET n = n + 1 WHERE id > ? AND id <= ?", lo, lo+2000); err != nil {
			t.Errorf("filler writer: %v", err)
			return
		}
	}
}

func (s *mysqlSource) stopLoad() {
	s.stop()
	s.wg.Wait()
}

// conn are the flags that reach the source as the backup user.
func (s *mysqlSource) conn() []string {
	return []string{"--host", "127.0.0.1", "--port", strconv.Itoa(s.srv.Port), "--user", "bk", "--password-file", s.pwFile}
}

var mysqlGTIDRe = regexp.MustCompile(`GTID: (\S+)`)

// restoredSet is the gtid_executed a MySQL restore printed.
func restoredSet(t testing.TB, stdout string) string {
	t.Helper()
	m := mysqlGTIDRe.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("restore printed no GTID set:\n%s", stdout)
	}
	return m[1]
}

// checkMySQLCopy starts MySQL on a restored datadir, checks the bank's invariants at
// exactly gtid (the backup's gtid_executed), makes it a replica of the source with
// GTID auto-position and compares every table once it caught up.
func (s *mysqlSource) checkMySQLCopy(t *testing.T, datadir, gtid string, id uint32, want map[string]string) {
	t.Helper()
	rep := testdb.StartMySQL(t, testdb.MySQLOptions{Datadir: datadir, ServerID: id})
	if uuid := rep.QueryString(t, "SELECT @@server_uuid"); uuid == s.srv.QueryString(t, "SELECT @@server_uuid") {
		t.Fatalf("the restored server has the source's server_uuid %s: it cannot replicate from it", uuid)
	}
	rdb := rep.DB(t)
	s.bank.Check(t, rdb, gtid)
	testdb.StartReplica(t, rep, s.srv, gtid, "repl", "replpw")
	testdb.WaitCaughtUp(t, rep, s.srv, 2*time.Minute)
	compareChecksums(t, want, testdb.Checksums(t, rdb))
	rep.Stop(t)
}

// TestMySQL: MySQL 8.0.31 (the 8.0.30+ redo layout) through every end under the bank's
// transfers and a writer that laps the 8M redo several times:
//   - a directory backup of an InnoDB-only server (commits never blocked) at 16 MB/s,
//     while a CREATE TABLE waits for it;
//   - with a MyISAM table written meanwhile (commits blocked for its copy, and the log
//     says how long): a stream piped into a restore, an S3 repository backup and two
//     incrementals on it, and a clone (ferry serve, ferry clone --start --replicate) that
//     runs mysqld on its datadir and replicates with auto-position.
//
// Each restored copy is recovered by the stock mysqld, started, checked by the bank's
// invariants at exactly its gtid_executed, made a replica of the source with
// auto-position and compared table by table once caught up; so is the clone. A user
// without BACKUP_ADMIN is refused before anything is written.
func TestMySQL(t *testing.T) {
	t.Parallel() // own servers, ports and dirs; waits on the source's LSN, not on time
	s := startMySQLSource(t)
	src := s.srv
	tmp := testdb.ShortDir(t)
	r := newS3Repo(t, "mysql", "db1")
	src.Exec(t, "CREATE USER weak@'%' IDENTIFIED WITH mysql_native_password BY 'bkpw'")
	src.Exec(t, "GRANT RELOAD, PROCESS ON *.* TO weak@'%'")
	weak := append(s.conn()[:4], "--user", "weak", "--password-file", s.pwFile)
	wantExit(t, wantFail(t, nil, "lacks BACKUP_ADMIN", append(append([]string{"backup"}, weak...), "--target-dir", filepath.Join(tmp, "weak"))...), 3)
	if _, err := os.Stat(filepath.Join(tmp, "weak")); err == nil {
		t.Error("a refused backup wrote its target")
	}

	s.startLoad(t)
	dir := filepath.Join(tmp, "dir")
	ddlDone, ddlWaited := make(chan time.Time, 1), make(chan bool, 1)
	go s.ddlDuringBackup(t, ddlDone, ddlWaited)
	res := mustFerry(t, append(append([]string{"backup"}, s.conn()...), "--target-dir", dir, "--max-rate", "16M")...)
	backupEnd := time.Now()
	if !strings.Contains(res.stderr, "only InnoDB tables: commits are not blocked") {
		t.Errorf("the InnoDB-only backup does not say commits were not blocked:\n%s", tail(res.stderr, 20))
	}
	if !<-ddlWaited {
		t.Error("the CREATE TABLE run during the backup was never seen waiting for the backup lock")
	}
	if done := <-ddlDone; done.Before(backupEnd.Add(-time.Second)) {
		t.Errorf("CREATE TABLE finished at %s, before the backup released its instance lock (%s)", done, backupEnd)
	}
	if _, err := os.Stat(filepath.Join(dir, "filler", "made_during.ibd")); err == nil {
		t.Error("the table created while the backup held LOCK INSTANCE FOR BACKUP is in the backup")
	}

	src.Exec(t, "CREATE TABLE filler.flat (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=MyISAM")
	ctx, stopFlat := context.WithCancel(context.Background())
	var flat sync.WaitGroup
	flat.Add(1)
	go func() {
		defer flat.Done()
		for ctx.Err() == nil {
			if _, err := src.DB(t).Exec("INSERT INTO filler.flat (v) VALUES (1)"); err != nil {
				t.Errorf("MyISAM writer: %v", err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if !strings.Contains(res.stderr, "no redo log archive directory") {
		t.Errorf("the backup of a server without innodb_redo_log_archive_dirs does not say it reads the redo files:\n%s", tail(res.stderr, 20))
	}
	// From here the server archives its redo for every copy (--redo-archive auto):
	// the copies read it from the archive, which the server keeps until they do.
	archive := filepath.Join(tmp, "redo-archive")
	if err := os.Mkdir(archive, 0o700); err != nil {
		t.Fatal(err)
	}
	src.Exec(t, "SET GLOBAL innodb_redo_log_archive_dirs = ?", "backups:"+archive)
	src.Exec(t, "GRANT INNODB_REDO_LOG_ARCHIVE ON *.* TO bk@'%'")
	streamed := filepath.Join(tmp, "streamed")
	// The link stalls after the stream's first bytes until the server wrote four times
	// its 8M redo capacity (the copy starts at a checkpoint past the archive's start, up
	// to one capacity later: at least three laps fall inside it): the redo copy spools
	// locally (and follows the archive), so the log laps while the end takes nothing,
	// and the backup does not lose the race.
	from := s.lsn(t)
	p := pipelineThrough(t, append([]string{"backup", "--stream"}, s.conn()...),
		[]string{"restore", "--from", "-", "--datadir", streamed}, false,
		func(w io.Writer) io.Writer { return &stallWriter{w: w, until: s.lapped(from + 4*8<<20)} }, 3*time.Minute)
	if n := redoBytes(t, p.backup.stderr); n <= 3*8<<20 {
		t.Errorf("the stream's redo copy is %d bytes, less than the 3 laps of the server's 8M log written while the link stalled", n)
	}
	if !strings.Contains(p.backup.stderr, "copied from the server's redo log archive") {
		t.Errorf("the stream's redo copy did not follow the server's redo log archive:\n%s", tail(p.backup.stderr, 20))
	}
	if left, _ := os.ReadDir(archive); len(left) != 0 {
		t.Errorf("the backup left %d entries in the redo archive directory", len(left))
	}
	if !regexp.MustCompile(`commits were blocked.*for=`).MatchString(p.backup.stderr) {
		t.Errorf("the backup with a MyISAM table does not say how long commits were blocked:\n%s", tail(p.backup.stderr, 20))
	}
	full := strings.TrimSpace(r.run(t, append([]string{"backup", "--repo", r.url}, s.conn()...)...).stdout)
	for range 2 { // two incrementals on it, the changed pages found by their LSNs
		inc := r.run(t, append([]string{"backup", "--repo", r.url, "--incremental"}, s.conn()...)...)
		if !strings.Contains(inc.stderr, "changed pages by scan") {
			t.Errorf("the MySQL incremental does not say it found its pages by scan:\n%s", tail(inc.stderr, 15))
		}
	}
	rcpt := s.cloneRunning(t, tmp)
	stopFlat()
	flat.Wait()
	s.stopLoad()
	want := testdb.Checksums(t, src.DB(t))

	out := mustFerry(t, "restore", "--target-dir", dir, "--datadir", filepath.Join(tmp, "restored-dir"))
	if !strings.Contains(out.stdout, "SOURCE_AUTO_POSITION=1") || !strings.Contains(out.stdout, "mysqld --datadir=") {
		t.Errorf("restore does not print MySQL's start command and replica statements:\n%s", out.stdout)
	}
	t.Run("clone", func(t *testing.T) {
		testdb.WaitCaughtUp(t, rcpt, src, 2*time.Minute)
		s.bank.Check(t, rcpt.DB(t), src.QueryString(t, "SELECT @@GLOBAL.gtid_executed"))
		compareChecksums(t, want, testdb.Checksums(t, rcpt.DB(t)))
	})
	t.Run("dir", func(t *testing.T) {
		s.checkMySQLCopy(t, filepath.Join(tmp, "restored-dir"), restoredSet(t, out.stdout), 2, want)
	})
	t.Run("stream", func(t *testing.T) {
		s.checkMySQLCopy(t, streamed, restoredSet(t, p.restore.stdout), 3, want)
	})
	t.Run("repo", func(t *testing.T) {
		datadir := filepath.Join(tmp, "restored-full")
		out := r.run(t, "restore", "--repo", r.url, full, "--datadir", datadir)
		s.checkMySQLCopy(t, datadir, restoredSet(t, out.stdout), 6, want)
	})
	t.Run("repo incrementals", func(t *testing.T) {
		r.run(t, "verify", "--repo", r.url, "latest")
		uuid := src.QueryString(t, "SELECT @@server_uuid")
		if list := r.run(t, "list", "--repo", r.url); !strings.Contains(list.stdout, uuid) || !strings.Contains(list.stdout, "complete") {
			t.Errorf("list does not show the MySQL backup complete with its GTIDs (%s):\n%s", uuid, list.stdout)
		}
		datadir := filepath.Join(tmp, "restored-repo")
		out := r.run(t, "restore", "--repo", r.url, "latest", "--datadir", datadir)
		s.checkMySQLCopy(t, datadir, restoredSet(t, out.stdout), 4, want)
	})
}

// cloneRunning clones the source, under its load, into a new datadir with ferry serve
// and ferry clone --start --replicate: the clone runs mysqld with its own my.cnf and
// replicates from the source with auto-position.
func (s *mysqlSource) cloneRunning(t *testing.T, tmp string) *testdb.Server {
	t.Helper()
	rcpt := testdb.ConfigureMySQL(t, testdb.MySQLOptions{ServerID: 5})
	token := writeFile(t, tmp, "clone-token", "correct horse battery staple 7f3a")
	pw := writeFile(t, tmp, "repl.pw", "replpw\n")
	addr := "127.0.0.1:" + strconv.Itoa(testdb.FreePort(t))
	serve := startFerry(t, nil, append([]string{"serve", "--listen", addr, "--token-file", token, "--once"}, s.conn()...)...)
	var out result
	waitFor(t, 30*time.Second, "ferry serve listening", func() bool {
		out = ferry(t, nil, "clone", "--from", addr, "--token-file", token, "--datadir", rcpt.Datadir,
			"--defaults-file", rcpt.ConfigFile, "--start", "--replicate", "--repl-user", "repl", "--repl-password-file", pw)
		return out.err == nil || !strings.Contains(out.stderr, "is ferry serve running there")
	})
	if out.err != nil {
		t.Fatalf("ferry clone: %v\n%s", out.err, tail(out.stderr, 15))
	}
	serve.Wait()
	rcpt.Adopt(t)
	if !strings.Contains(out.stdout, "mysqld is running on it") || !strings.Contains(out.stdout, "SOURCE_AUTO_POSITION=1") {
		t.Errorf("ferry clone of MySQL does not say mysqld runs and replicates with auto-position:\n%s", out.stdout)
	}
	return rcpt
}

var redoBytesRe = regexp.MustCompile(`redo copy finished"? redo_bytes=(\d+)`)

// redoBytes is the size of a backup's redo copy, from its log.
func redoBytes(t testing.TB, stderr string) int64 {
	t.Helper()
	m := redoBytesRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the backup's log has no redo copy size:\n%s", tail(stderr, 10))
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// lsn is the source's current LSN.
func (s *mysqlSource) lsn(t testing.TB) uint64 {
	n, err := strconv.ParseUint(s.srv.QueryString(t, "SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Innodb_redo_log_current_lsn'"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lapped says whether the source's LSN passed lsn, or it cannot tell (an error: the
// stream then goes on, and the test's assertion on the redo copied fails). It runs on
// the pipe's goroutine, where t.Fatal must not be called.
func (s *mysqlSource) lapped(lsn uint64) func() bool {
	return func() bool {
		var v string
		err := s.db.QueryRow("SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Innodb_redo_log_current_lsn'").Scan(&v)
		n, perr := strconv.ParseUint(v, 10, 64)
		return err != nil || perr != nil || n > lsn
	}
}

// ddlDuringBackup waits until a backup holds LOCK INSTANCE FOR BACKUP, runs a CREATE
// TABLE, and says whether it was seen waiting for the lock and when it finished.
func (s *mysqlSource) ddlDuringBackup(t *testing.T, done chan<- time.Time, waited chan<- bool) {
	db := s.srv.DB(t)
	waitFor(t, time.Minute, "the backup's instance lock", func() bool {
		return s.srv.QueryString(t, "SELECT COUNT(*) FROM performance_schema.metadata_locks WHERE OBJECT_TYPE = 'BACKUP LOCK'") != "0"
	})
	go func() {
		seen := false
		for i := 0; i < 200 && !seen; i++ { // not t.Fatal here: another goroutine
			var n int
			seen = s.db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for backup lock'").Scan(&n) == nil && n > 0
			time.Sleep(50 * time.Millisecond)
		}
		waited <- seen
	}()
	if _, err := db.Exec("CREATE TABLE filler.made_during (id INT PRIMARY KEY)"); err != nil {
		t.Errorf("DDL during the backup: %v", err)
	}
	done <- time.Now()
}

// stallWriter passes nothing on until until says so, then everything.
type stallWriter struct {
	w     io.Writer
	until func() bool
	open  bool
}

func (s *stallWriter) Write(p []byte) (int, error) {
	for !s.open {
		s.open = s.until()
		if !s.open {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return s.w.Write(p)
}
