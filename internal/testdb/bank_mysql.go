package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"testing"
)

// On MySQL a transaction's GTID is <server_uuid>:<n>, n chosen at commit, unless the
// session sets gtid_next before the transaction starts. The bank gives its transfers
// their own UUID and commits transfer seq as <bank UUID>:<seq>, so the ledger's last seq
// is the bank UUID's last transaction number in any gtid_executed. gtid_next cannot be
// set inside a transaction, before the counter's row lock tells the seq, so a named
// lock (bankLock) serialises the transfers from before the counter is read until after
// the commit; the row lock is still taken, as on MariaDB.

// bankLock is the named lock (GET_LOCK) a MySQL bank's transfers hold.
const bankLock = "ferry_testdb_bank"

// newBankUUID returns a random UUID for a bank's GTIDs.
func newBankUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// UUID returns the source UUID of a MySQL bank's GTIDs ("" on MariaDB).
func (b *Bank) UUID() string {
	if !b.mysql {
		return ""
	}
	return b.opt.UUID
}

// initMySQL gives the bank its UUID and refuses one the server has executed GTIDs of:
// a transaction with an executed GTID is skipped without an error.
func (b *Bank) initMySQL(t testing.TB, db *sql.DB) {
	t.Helper()
	if b.opt.UUID == "" {
		b.opt.UUID = newBankUUID()
	}
	executed, err := queryString(context.Background(), db, "SELECT @@GLOBAL.gtid_executed")
	if err != nil {
		t.Fatalf("bank: %v", err)
	}
	if ivs := gtidIntervals(executed, b.opt.UUID); len(ivs) > 0 {
		t.Fatalf("bank: the server has executed GTIDs %s:%s already; give the bank another UUID", b.opt.UUID, formatIntervals(ivs))
	}
}

// transferMySQL commits one transfer as GTID <bank UUID>:<seq> and records it.
func (b *Bank) transferMySQL(conn *sql.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	if err := lockBank(ctx, conn); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), "DO RELEASE_LOCK('"+bankLock+"')")
	var seq int64
	if err := conn.QueryRowContext(ctx, "SELECT seq FROM bank.counter WHERE id = 1").Scan(&seq); err != nil {
		return fmt.Errorf("read the bank counter: %w", err)
	}
	want := fmt.Sprintf("%s:%d", b.opt.UUID, seq+1)
	if _, err := conn.ExecContext(ctx, "SET SESSION gtid_next = '"+want+"'"); err != nil {
		return err
	}
	// After a commit or rollback gtid_next must be set again: back to AUTOMATIC.
	defer conn.ExecContext(context.Background(), "SET SESSION gtid_next = 'AUTOMATIC'")
	got, err := b.commitTransfer(ctx, conn)
	if err != nil {
		return err
	}
	if got != seq+1 {
		return fmt.Errorf("transfer %d committed as GTID %s: is the bank counter written elsewhere?", got, want)
	}
	b.record(got, want)
	return nil
}

// lockBank takes bankLock on conn's session.
func lockBank(ctx context.Context, conn *sql.Conn) error {
	got, err := queryString(ctx, conn, fmt.Sprintf("SELECT GET_LOCK('%s', %d)", bankLock, int(txTimeout.Seconds())))
	if err != nil {
		return err
	}
	if got != "1" {
		return fmt.Errorf("bank lock %s not granted within %v (GET_LOCK said %q)", bankLock, txTimeout, got)
	}
	return nil
}

// commitTransfer runs a transfer's transaction on conn and returns its seq.
func (b *Bank) commitTransfer(ctx context.Context, conn *sql.Conn) (int64, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	seq, _, err := b.apply(ctx, tx)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit seq %d: %w", seq, err)
	}
	return seq, nil
}

// record notes the GTID transfer seq committed with and counts it.
func (b *Bank) record(seq int64, gtid string) {
	b.mu.Lock()
	b.gtid[seq] = gtid
	b.mu.Unlock()
	b.ops.Add(1)
}

// checkGTIDSet checks on MySQL that the ledger ends at the bank UUID's last transaction
// in the gtid_executed set want, and that the set holds the bank's transfers 1..last
// as one interval, and that every row carries its own GTID.
func (b *Bank) checkGTIDSet(t testing.TB, bySeq map[int64]string, last int64, want string) {
	t.Helper()
	for seq, g := range bySeq {
		if g != fmt.Sprintf("%s:%d", b.opt.UUID, seq) {
			t.Errorf("bank: ledger seq %d has GTID %q, want %s:%d", seq, g, b.opt.UUID, seq)
			break
		}
	}
	ivs := gtidIntervals(want, b.opt.UUID)
	if n := GTIDSetLast(want, b.opt.UUID); n != last {
		t.Errorf("bank: ledger ends at seq %d, but the GTID set's last transfer is %s:%d (set %q)", last, b.opt.UUID, n, want)
	} else if last > 0 && (len(ivs) != 1 || ivs[0] != [2]int64{1, last}) {
		t.Errorf("bank: the GTID set holds transfers %s:%s, want 1-%d", b.opt.UUID, formatIntervals(ivs), last)
	}
}
