//go:build e2e

package testdb

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// TestHarness runs every workload on a live server, checks the invariants on
// it, and replicates it to a second server whose checksums must match.
func TestHarness(t *testing.T) {
	src := Start(t, Options{ServerID: 1})
	t.Logf("source %s on port %d", src.Version(t), src.Port)
	startPos := src.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos")
	CreateReplicationUser(t, src, "repl", "replpw")
	db := src.DB(t)
	bank := NewBank(t, db, BankOptions{Accounts: 50, Domain: 7})
	mix := NewMix(t, db)
	ddl := NewDDL(t, db)

	rep := Start(t, Options{ServerID: 2})
	StartReplica(t, rep, src, startPos, "repl", "replpw")

	runFor(t, 3*time.Second, func(ctx context.Context) error { return bank.Run(ctx, 3) }, mix.Run, ddl.Run)
	t.Logf("ops: bank %d, mix %d, ddl %d", bank.Ops(), mix.Ops(), ddl.Ops())
	if bank.Ops() == 0 || mix.Ops() == 0 || ddl.Ops() == 0 {
		t.Fatal("a workload made no progress")
	}

	pos := src.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos")
	want := GTIDForDomain(pos, 7)
	if want != bank.GTIDOf(bank.Ops()) {
		t.Errorf("binlog position %s, last transfer %d committed as %s", pos, bank.Ops(), bank.GTIDOf(bank.Ops()))
	}
	bank.Check(t, db, want)
	mix.Check(t, db)
	ddl.Check(t, db)

	WaitCaughtUp(t, rep, src, 30*time.Second)
	rdb := rep.DB(t)
	bank.Check(t, rdb, want)
	mix.Check(t, rdb)
	ddl.Check(t, rdb)
	sums, rsums := Checksums(t, db), Checksums(t, rdb)
	if len(sums) < 10 || !maps.Equal(sums, rsums) {
		t.Errorf("checksums differ:\nsource  %v\nreplica %v", sorted(sums), sorted(rsums))
	}
	rep.Stop(t)
	checksCatchDamage(t, src, bank, mix, ddl)
	src.Stop(t)
}

// checksCatchDamage damages each schema in turn and expects its check to fail.
func checksCatchDamage(t *testing.T, s *Server, bank *Bank, mix *Mix, ddl *DDL) {
	db := s.DB(t)
	for _, c := range []struct {
		damage string
		check  func(testing.TB)
	}{
		{"UPDATE bank.accounts SET balance = balance + 1 WHERE id = 1", func(t testing.TB) { bank.Check(t, db, "") }},
		{"UPDATE bank.accounts SET balance = balance - 1 WHERE id = 1", func(t testing.TB) { bank.Check(t, db, "7-1-1") }},
		{"DELETE FROM bank.ledger WHERE seq = 2", func(t testing.TB) { bank.Check(t, db, "") }},
		{"UPDATE mix.myisam SET a = a + 1 WHERE id = 1", func(t testing.TB) { mix.Check(t, db) }},
		{"CREATE TABLE ddl.m (id INT) ENGINE=MyISAM", func(t testing.TB) { ddl.Check(t, db) }},
		{"DROP TABLE ddl.m; SELECT 1 INTO OUTFILE '" + s.Datadir + "/ddl/t9.ibd'", func(t testing.TB) { ddl.Check(t, db) }},
	} {
		s.Exec(t, c.damage)
		if msgs := failures(c.check); len(msgs) == 0 {
			t.Errorf("check passed after %s", c.damage)
		} else {
			t.Logf("after %s: %s", c.damage, msgs[0])
		}
	}
}

// runFor runs workloads concurrently for d, then stops them and fails on any error.
func runFor(t *testing.T, d time.Duration, workloads ...func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	g := new(errgroup.Group)
	for _, w := range workloads {
		g.Go(func() error { return w(ctx) })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
}

// sorted lists a map's entries by key.
func sorted(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// TestStopKillRestart stops a server by pid, restarts it, crashes it and restarts it again.
func TestStopKillRestart(t *testing.T) {
	s := Start(t, Options{NoBinlog: true, Args: []string{"--innodb-flush-log-at-trx-commit=1"}})
	s.Exec(t, "CREATE TABLE test.t (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO test.t VALUES (1)")
	s.Stop(t)
	s.Restart(t)
	s.Exec(t, "INSERT INTO test.t VALUES (2)")
	s.Kill(t)
	s.Restart(t)
	if n := s.QueryString(t, "SELECT COUNT(*) FROM test.t"); n != "2" {
		t.Fatalf("after crash recovery test.t has %s rows, want 2", n)
	}
}

// TestStartFailureShowsLog expects a failed start to report the error log.
func TestStartFailureShowsLog(t *testing.T) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); Start(r, Options{Args: []string{"--no-such-option=1"}}) }()
	<-done
	if len(r.msgs) != 1 || !strings.Contains(r.msgs[0], "unknown variable 'no-such-option=1'") {
		t.Fatalf("start failure reported %q, want the error log's complaint", r.msgs)
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	msgs []string
}

// Helper does nothing.
func (r *recorder) Helper() {}

// Error records a failure.
func (r *recorder) Error(a ...any) { r.msgs = append(r.msgs, fmt.Sprint(a...)) }

// Errorf records a failure.
func (r *recorder) Errorf(f string, a ...any) { r.msgs = append(r.msgs, fmt.Sprintf(f, a...)) }

// Fatal records a failure and ends the goroutine.
func (r *recorder) Fatal(a ...any) { r.Error(a...); runtime.Goexit() }

// Fatalf records a failure and ends the goroutine.
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }

// failures runs check on a recorder and returns what it reported.
func failures(check func(testing.TB)) []string {
	r := &recorder{}
	done := make(chan struct{})
	go func() { defer close(done); check(r) }()
	<-done
	return r.msgs
}
