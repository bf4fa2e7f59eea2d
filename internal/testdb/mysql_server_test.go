//go:build e2e

package testdb

import (
	"context"
	"database/sql"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TestMySQLHarness runs the bank and the non-InnoDB writers on a MySQL 8.0 source while a
// second server replicates it by GTID auto-position, checks the invariants on both at
// the source's gtid_executed, compares their checksums, and expects the bank's check
// to catch a wrong GTID set.
func TestMySQLHarness(t *testing.T) {
	at := time.Now()
	src := StartMySQL(t, MySQLOptions{ServerID: 1})
	t.Logf("source %s on port %d: started in %v (first: with the initialize)", src.Version(t), src.Port, time.Since(at))
	at = time.Now()
	rep := StartMySQL(t, MySQLOptions{ServerID: 2})
	t.Logf("replica started in %v", time.Since(at))
	if a, b := src.QueryString(t, "SELECT @@server_uuid"), rep.QueryString(t, "SELECT @@server_uuid"); a == b {
		t.Fatalf("both servers have server_uuid %s", a)
	}
	CreateReplicationUser(t, src, "repl", "replpw")
	MySQLBackupUser(t, src, "bk", "bkpw")
	checkBackupUser(t, src, "bk", "bkpw")

	db := src.DB(t)
	bank := NewBank(t, db, BankOptions{Accounts: 50})
	mix := NewMix(t, db)
	StartReplica(t, rep, src, "", "repl", "replpw")
	runFor(t, 3*time.Second, func(ctx context.Context) error { return bank.Run(ctx, 3) }, mix.Run)
	t.Logf("ops: bank %d, mix %d", bank.Ops(), mix.Ops())
	if bank.Ops() == 0 || mix.Ops() == 0 {
		t.Fatal("a workload made no progress")
	}

	set := src.QueryString(t, "SELECT @@GLOBAL.gtid_executed")
	if n := GTIDSetLast(set, bank.UUID()); n != bank.Ops() {
		t.Errorf("gtid_executed %q: the bank's last transfer is %d, it made %d", set, n, bank.Ops())
	}
	bank.Check(t, db, set)
	mix.Check(t, db)
	WaitCaughtUp(t, rep, src, 30*time.Second)
	rdb := rep.DB(t)
	bank.Check(t, rdb, set)
	mix.Check(t, rdb)
	if sums, rsums := Checksums(t, db), Checksums(t, rdb); len(sums) != 6 || !maps.Equal(sums, rsums) {
		t.Errorf("checksums differ:\nsource  %v\nreplica %v", sorted(sums), sorted(rsums))
	}
	short := bank.UUID() + ":1-" + strconv.FormatInt(bank.Ops()-1, 10)
	if msgs := failures(func(t testing.TB) { bank.Check(t, db, short) }); len(msgs) == 0 {
		t.Errorf("the bank's check passed at %s", short)
	}
	at = time.Now()
	rep.Stop(t)
	t.Logf("replica stopped in %v", time.Since(at))
}

// checkBackupUser connects as user over TCP without TLS and takes the backup lock.
func checkBackupUser(t *testing.T, s *Server, user, password string) {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = user, password, "tcp", "127.0.0.1:"+strconv.Itoa(s.Port)
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"LOCK INSTANCE FOR BACKUP", "SELECT * FROM performance_schema.log_status", "UNLOCK INSTANCE"} {
		if _, err := queryMaps(conn, q); err != nil {
			t.Errorf("as %s over TCP: %v", user, err)
		}
	}
}

// TestMySQLStopKillRestart stops a MySQL server by pid, restarts it, crashes it and
// restarts it again, then runs a second server on the first one's datadir.
func TestMySQLStopKillRestart(t *testing.T) {
	s := StartMySQL(t, MySQLOptions{NoBinlog: true})
	s.Exec(t, "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO d.t VALUES (1)")
	at := time.Now()
	s.Stop(t)
	t.Logf("stopped in %v", time.Since(at))
	at = time.Now()
	s.Restart(t)
	t.Logf("restarted in %v", time.Since(at))
	s.Exec(t, "INSERT INTO d.t VALUES (2)")
	s.Kill(t)
	s.Restart(t)
	if n := s.QueryString(t, "SELECT COUNT(*) FROM d.t"); n != "2" {
		t.Fatalf("after crash recovery d.t has %s rows, want 2", n)
	}
	s.Stop(t)
	on := StartMySQL(t, MySQLOptions{Datadir: s.Datadir})
	if n := on.QueryString(t, "SELECT COUNT(*) FROM d.t"); n != "2" {
		t.Fatalf("on the stopped server's datadir d.t has %s rows, want 2", n)
	}
}
