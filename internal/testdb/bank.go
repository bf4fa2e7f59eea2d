package testdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/sync/errgroup"
)

// BankOptions configures NewBank.
type BankOptions struct {
	Accounts int    // number of accounts (at least 2); 0 means 100
	Domain   uint32 // gtid_domain_id of the transfers, used by nothing else; 0 means 7
	// UUID is, on MySQL, the source UUID of the transfers' GTIDs (<UUID>:<seq>, see
	// bank_mysql.go), used by nothing else; "" means a random one (Bank.UUID).
	UUID string
	// NoGTID leaves GTIDs alone: a Galera node with wsrep_gtid_mode gives every
	// write-set the cluster's domain, so the ledger's gtid column stays empty and
	// Check's wantGTID must be "".
	NoGTID bool
	// Cluster: the server is a Galera node. A transfer refused because the node is
	// briefly outside the primary component (a view change while other nodes are
	// killed or restarted on a loaded host: errors 1047 and 1180) is rolled back by the
	// server and retried, as a cluster's clients do, for up to ClusterWait.
	Cluster bool
}

// ClusterWait bounds how long a Cluster bank retries one transfer while its node is
// outside the primary component.
const ClusterWait = time.Minute

// Bank is a transfer workload in schema `bank` whose commits are serialised,
// so ledger seq order is commit and GTID order.
//
// Each ledger row's gtid column holds the GTID its own transaction was
// binlogged with (predicted in the transaction, verified after COMMIT; on MySQL
// set with gtid_next).
type Bank struct {
	db    *sql.DB
	opt   BankOptions
	mysql bool // the server is MySQL, not MariaDB
	mu    sync.Mutex
	gtid  map[int64]string
	ops   atomic.Int64
	// nonPrimary counts transfers retried because the node was not primary.
	nonPrimary atomic.Int64
}

// InitialBalance is every account's starting balance.
const InitialBalance = 1000

// txTimeout bounds one workload statement or transaction; workloads stop
// between transactions when their ctx is cancelled, never inside one.
const txTimeout = 2 * time.Minute

// NewBank (re)creates schema `bank` on db, a MariaDB or MySQL server.
func NewBank(t testing.TB, db *sql.DB, opt BankOptions) *Bank {
	t.Helper()
	if opt.Accounts == 0 {
		opt.Accounts = 100
	}
	if opt.Domain == 0 {
		opt.Domain = 7
	}
	if opt.Accounts < 2 {
		t.Fatalf("bank: %d accounts, need at least 2", opt.Accounts)
	}
	b := &Bank{db: db, opt: opt, gtid: map[int64]string{}}
	var err error
	if b.mysql, err = isMySQL(context.Background(), db); err != nil {
		t.Fatalf("bank: %v", err)
	}
	if b.mysql && !opt.NoGTID {
		b.initMySQL(t, db)
	}
	mustExec(t, db, "DROP DATABASE IF EXISTS bank", "CREATE DATABASE bank",
		"CREATE TABLE bank.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE bank.ledger (seq BIGINT PRIMARY KEY, from_id INT NOT NULL, to_id INT NOT NULL, "+
			"amount BIGINT NOT NULL, gtid VARCHAR(64) NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE bank.counter (id TINYINT PRIMARY KEY, seq BIGINT NOT NULL) ENGINE=InnoDB",
		"INSERT INTO bank.counter VALUES (1, 0)",
		"INSERT INTO bank.accounts VALUES "+rowsOf(opt.Accounts, "(%d, "+strconv.Itoa(InitialBalance)+")"))
	return b
}

// mustExec runs statements in order, failing the test on the first error.
func mustExec(t testing.TB, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// Ops returns the number of committed transfers.
func (b *Bank) Ops() int64 { return b.ops.Load() }

// GTIDOf returns the GTID transfer seq committed with, or "" if not recorded.
func (b *Bank) GTIDOf(seq int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gtid[seq]
}

// Run makes transfers on threads connections until ctx is cancelled. It
// returns nil then, or the first error of each failed thread.
func (b *Bank) Run(ctx context.Context, threads int) error {
	g := new(errgroup.Group)
	for range threads {
		g.Go(func() error { return b.thread(ctx) })
	}
	return g.Wait()
}

// thread runs transfers on one session in the bank's GTID domain.
func (b *Bank) thread(ctx context.Context) error {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return ctxErr(ctx, err)
	}
	defer discard(conn)
	if !b.opt.NoGTID && !b.mysql {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION gtid_domain_id = %d", b.opt.Domain)); err != nil {
			return ctxErr(ctx, err)
		}
	}
	for ctx.Err() == nil {
		if err := b.transferRetry(conn); err != nil {
			return fmt.Errorf("bank after %d transfers: %w", b.Ops(), err)
		}
	}
	return nil
}

// discard closes conn instead of returning it to the pool, so that its
// session gtid_domain_id does not leak into other users of the pool.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// ctxErr hides err when ctx was cancelled (the workload is just stopping).
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// NonPrimaryRetries is how many transfers a Cluster bank retried because its node was
// outside the primary component.
func (b *Bank) NonPrimaryRetries() int64 { return b.nonPrimary.Load() }

// transferRetry runs one transfer, retrying deadlocks and lock wait timeouts, and on
// a Cluster bank the refusals of a node outside the primary component.
func (b *Bank) transferRetry(conn *sql.Conn) error {
	var since time.Time
	for {
		err := b.transfer(conn)
		switch {
		case retryable(err):
		case b.opt.Cluster && nonPrimary(err):
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > ClusterWait {
				return fmt.Errorf("the node stayed outside the primary component for %v: %w", ClusterWait, err)
			}
			b.nonPrimary.Add(1)
			time.Sleep(100 * time.Millisecond)
		default:
			return err
		}
	}
}

// nonPrimary reports a Galera node's refusal while it is outside the primary
// component: 1047 (WSREP has not yet prepared node for application use) or 1180 with
// "Not connected to Primary Component" (the write-set could not be replicated, and
// the transaction was rolled back).
func nonPrimary(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1047 ||
		me.Number == 1180 && strings.Contains(me.Message, "Not connected to Primary Component"))
}

// retryable reports a deadlock or lock wait timeout.
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// transfer commits one transfer and records its GTID.
func (b *Bank) transfer(conn *sql.Conn) error {
	if b.mysql && !b.opt.NoGTID {
		return b.transferMySQL(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	seq, want, err := b.apply(ctx, tx)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit seq %d: %w", seq, err)
	}
	if b.opt.NoGTID {
		b.ops.Add(1)
		return nil
	}
	got, err := queryString(ctx, conn, "SELECT @@last_gtid")
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("seq %d committed as GTID %q, predicted %q: is domain %d used elsewhere?", seq, got, want, b.opt.Domain)
	}
	b.mu.Lock()
	b.gtid[seq] = got
	b.mu.Unlock()
	b.ops.Add(1)
	return nil
}

// apply does a transfer's statements inside tx, returning its seq and predicted GTID.
func (b *Bank) apply(ctx context.Context, tx *sql.Tx) (int64, string, error) {
	var seq int64
	if err := tx.QueryRowContext(ctx, "SELECT seq FROM bank.counter WHERE id = 1 FOR UPDATE").Scan(&seq); err != nil {
		return 0, "", err
	}
	seq++
	gtid, err := b.nextGTID(ctx, tx, seq)
	if err != nil {
		return 0, "", err
	}
	from := 1 + rand.IntN(b.opt.Accounts)
	to := 1 + (from+rand.IntN(b.opt.Accounts-1))%b.opt.Accounts
	amount := 1 + rand.IntN(100)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"UPDATE bank.accounts SET balance = balance - ? WHERE id = ?", []any{amount, from}},
		{"UPDATE bank.accounts SET balance = balance + ? WHERE id = ?", []any{amount, to}},
		{"INSERT INTO bank.ledger VALUES (?, ?, ?, ?, ?)", []any{seq, from, to, amount, gtid}},
		{"UPDATE bank.counter SET seq = ? WHERE id = 1", []any{seq}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			return 0, "", err
		}
	}
	return seq, gtid, nil
}

// nextGTID predicts the GTID the current transaction will commit with: commits
// in the bank's domain are serialised by the counter lock, so it is the
// domain's last binlogged seq_no + 1. "" when the binlog is off. On MySQL it is
// <bank UUID>:<seq>, which transferMySQL set as gtid_next.
func (b *Bank) nextGTID(ctx context.Context, tx *sql.Tx, seq int64) (string, error) {
	if b.opt.NoGTID {
		return "", nil
	}
	if b.mysql {
		return fmt.Sprintf("%s:%d", b.opt.UUID, seq), nil
	}
	var logBin int
	var pos, serverID string
	err := tx.QueryRowContext(ctx, "SELECT @@log_bin, @@GLOBAL.gtid_binlog_pos, @@server_id").Scan(&logBin, &pos, &serverID)
	if err != nil || logBin == 0 {
		return "", err
	}
	var next uint64 = 1
	if g := GTIDForDomain(pos, b.opt.Domain); g != "" {
		n, err := strconv.ParseUint(g[strings.LastIndexByte(g, '-')+1:], 10, 64)
		if err != nil {
			return "", fmt.Errorf("parse GTID %q: %w", g, err)
		}
		next = n + 1
	}
	return fmt.Sprintf("%d-%s-%d", b.opt.Domain, serverID, next), nil
}

// SetDB points the bank at a new connection pool (its server was restarted).
func (b *Bank) SetDB(db *sql.DB) { b.db = db }
