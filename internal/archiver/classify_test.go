package archiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/ferry-backup/ferry/internal/mariadb"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
)

func TestClassify(t *testing.T) {
	const acct = "'repl'@'localhost'"
	dumpDenied := fmt.Errorf("start the binlog dump at mysql-bin.000001:4: %w",
		fmt.Errorf("register: %w", &gomysql.MyError{Code: 1045, State: "28000", Message: "Access denied for user 'repl'@'localhost' (using password: YES)"}))
	hostRefused := fmt.Errorf("server at 127.0.0.1:3306: Host '127.0.0.1' is not allowed to connect to this MariaDB server: %w", mariadb.ErrRefused)
	for _, c := range []struct {
		name      string
		err       error
		st        stage
		permanent bool
		want      string // in the message
	}{
		// What MariaDB 10.11 answers, as seen by e2e TestArchiverGrants.
		{"dump without REPLICATION SLAVE", dumpDenied, stageDump, true, "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'localhost'"},
		{"dump 1227", &gomysql.MyError{Code: 1227, Message: "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s) for this operation"}, stageDump, true, "GRANT REPLICATION SLAVE"},
		{"SHOW BINARY LOGS without BINLOG MONITOR", fmt.Errorf("SHOW BINARY LOGS: %w", &mysql.MySQLError{Number: 1227,
			Message: "Access denied; you need (at least one of) the SUPER, BINLOG MONITOR privilege(s) for this operation"}), stageQuery, true, "GRANT BINLOG MONITOR ON *.* TO 'repl'@'localhost'"},
		{"query 1045", &mysql.MySQLError{Number: 1045, Message: "Access denied for user"}, stageQuery, true, "check user name and the password"},
		{"1142", &mysql.MySQLError{Number: 1142, Message: "SELECT command denied"}, stageQuery, true, "REPLICATION SLAVE and BINLOG MONITOR"},
		{"1044", &mysql.MySQLError{Number: 1044, Message: "Access denied for user to database"}, stageQuery, true, "REPLICATION SLAVE and BINLOG MONITOR"},
		{"1236 event too big", &gomysql.MyError{Code: 1236, Message: "log event entry exceeded max_allowed_packet; Increase max_allowed_packet on master"}, stageDump, true, "raise max_allowed_packet"},
		// At connect, what mariadb.Open marks refused (the account, its host, its
		// password, its authentication) stops; the server being down or busy does not.
		{"connect: host not allowed", hostRefused, stageConnect, true, "is not allowed to connect"},
		{"connect: too many connections", &mysql.MySQLError{Number: 1040, Message: "Too many connections"}, stageConnect, false, ""},
		{"connect: server down", fmt.Errorf("cannot connect: %w", syscall.ECONNREFUSED), stageConnect, false, ""},
		// Transient: retried.
		{"1236 purged", &gomysql.MyError{Code: 1236, Message: "Could not find first log file name in binary log index file"}, stageDump, false, ""},
		{"server shutdown", &gomysql.MyError{Code: 1053, Message: "Server shutdown in progress"}, stageDump, false, ""},
		{"gone away", &mysql.MySQLError{Number: 2006, Message: "MySQL server has gone away"}, stageQuery, false, ""},
		{"EOF", fmt.Errorf("read: %w", io.EOF), stageDump, false, ""},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), stageDump, false, ""},
		{"reset", syscall.ECONNRESET, stageDump, false, ""},
		{"timeout", context.DeadlineExceeded, stageDump, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err, c.st, acct)
			if backoff.IsPermanent(got) != c.permanent {
				t.Fatalf("%v: permanent %v, want %v", got, backoff.IsPermanent(got), c.permanent)
			}
			if !c.permanent && got != c.err {
				t.Fatalf("a transient error was changed: %v", got)
			}
			if !strings.Contains(got.Error(), c.want) || strings.Contains(got.Error(), "\n") {
				t.Fatalf("%q: want one line containing %q", got, c.want)
			}
		})
	}
	if !isRepeatable(&gomysql.MyError{Code: 1236}) || isRepeatable(io.EOF) {
		t.Fatal("isRepeatable")
	}
	// An error already permanent (another server behind the address) stays as it is.
	other := fatalf("a different server is behind this address")
	if got := classify(other, stageQuery, acct); got != other {
		t.Fatalf("got %v", got)
	}
	if !errors.Is(classify(dumpDenied, stageDump, acct), backoff.ErrPermanent) {
		t.Fatal("not ErrPermanent")
	}
}

func TestPrivilegeIn(t *testing.T) {
	for msg, want := range map[string]string{
		"Access denied; you need (at least one of) the SUPER, BINLOG MONITOR privilege(s) for this operation": "BINLOG MONITOR",
		"Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s) for this operation":     "REPLICATION SLAVE",
		"something else": "DEFAULT",
	} {
		if got := privilegeIn(msg, "DEFAULT"); got != want {
			t.Errorf("%q: %q, want %q", msg, got, want)
		}
	}
}

// After each session: a lost connection waits longer each time up to the cap and
// starts over once something was stored; a permanent error stops at once; the same
// 1236 stops after maxRepeats sessions in a row.
func TestRetrier(t *testing.T) {
	clk := &backoff.Fake{}
	rt := newRetrier(backoff.Policy{Initial: time.Second, Max: 4 * time.Second, Jitter: -1, Clock: clk})
	lost := fmt.Errorf("read: %w", io.EOF)
	var waits []time.Duration
	for range 5 {
		w, err := rt.next(lost, false)
		if err != nil {
			t.Fatalf("a lost connection stopped the archiver: %v", err)
		}
		waits = append(waits, w)
	}
	if got := fmt.Sprint(waits); got != "[1s 2s 4s 4s 4s]" {
		t.Fatalf("waits %s", got)
	}
	if w, _ := rt.next(lost, true); w != time.Second {
		t.Fatalf("after storing, the wait is %v, want 1s again", w)
	}
	denied := classify(&gomysql.MyError{Code: 1045, Message: "Access denied"}, stageDump, "'a'@'h'")
	if _, err := rt.next(denied, false); err != denied {
		t.Fatalf("a missing grant: %v", err)
	}
	refused := fmt.Errorf("start the binlog dump: %w", &gomysql.MyError{Code: 1236, Message: "binlog truncated in the middle of event"})
	rt.next(refused, false)
	rt.next(lost, true) // progress in between starts the count again
	for i := 1; i <= maxRepeats; i++ {
		_, err := rt.next(refused, false)
		if (err != nil) != (i == maxRepeats) {
			t.Fatalf("1236 number %d: %v", i, err)
		}
		if err != nil && !strings.Contains(err.Error(), "5 times in a row") {
			t.Fatalf("%v", err)
		}
	}
}
