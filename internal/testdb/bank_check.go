package testdb

import (
	"database/sql"
	"fmt"
	"testing"
)

// Check asserts the bank invariants on db (typically a restored copy): money
// is conserved, every balance matches the ledger, the ledger is gap-free and
// each row carries the GTID recorded for it. If wantGTID is not "" (the
// bank-domain component of a recorded position, see GTIDForDomain), the
// ledger must end exactly at the transfer committed with that GTID. On MySQL
// wantGTID is a whole gtid_executed set: the ledger must end at the bank UUID's
// last transaction in it, and the set must hold the UUID's 1..last.
func (b *Bank) Check(t testing.TB, db *sql.DB, wantGTID string) {
	t.Helper()
	b.checkMoney(t, db)
	last := b.checkLedger(t, db)
	b.checkGTIDs(t, db, last, wantGTID)
}

// checkMoney checks the total and each account against the ledger.
func (b *Bank) checkMoney(t testing.TB, db *sql.DB) {
	t.Helper()
	var n, sum int64
	if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(balance), 0) FROM bank.accounts").Scan(&n, &sum); err != nil {
		t.Fatalf("bank: sum balances: %v", err)
	}
	if n != int64(b.opt.Accounts) || sum != n*InitialBalance {
		t.Errorf("bank: %d accounts holding %d, want %d holding %d", n, sum, b.opt.Accounts, b.opt.Accounts*InitialBalance)
	}
	bad, err := queryMaps(db, `SELECT a.id, a.balance, ? + COALESCE(i.s, 0) - COALESCE(o.s, 0) AS want
		FROM bank.accounts a
		LEFT JOIN (SELECT to_id AS id, SUM(amount) AS s FROM bank.ledger GROUP BY to_id) i ON i.id = a.id
		LEFT JOIN (SELECT from_id AS id, SUM(amount) AS s FROM bank.ledger GROUP BY from_id) o ON o.id = a.id
		WHERE a.balance <> ? + COALESCE(i.s, 0) - COALESCE(o.s, 0) ORDER BY a.id LIMIT 10`, InitialBalance, InitialBalance)
	if err != nil {
		t.Fatalf("bank: compare balances with ledger: %v", err)
	}
	for _, r := range bad {
		t.Errorf("bank: account %s has balance %s, ledger says %s", r["id"], r["balance"], r["want"])
	}
}

// checkLedger checks seq is 1..N without gaps and matches the counter; returns N.
func (b *Bank) checkLedger(t testing.TB, db *sql.DB) int64 {
	t.Helper()
	var n, lo, hi, counter int64
	err := db.QueryRow(`SELECT COUNT(*), COALESCE(MIN(seq), 1), COALESCE(MAX(seq), 0),
		(SELECT seq FROM bank.counter WHERE id = 1) FROM bank.ledger`).Scan(&n, &lo, &hi, &counter)
	if err != nil {
		t.Fatalf("bank: read ledger: %v", err)
	}
	if lo != 1 || hi != n {
		t.Errorf("bank: ledger has %d rows with seq %d..%d, want 1..%d without gaps", n, lo, hi, n)
	}
	if counter != hi {
		t.Errorf("bank: counter is %d, ledger ends at seq %d", counter, hi)
	}
	return hi
}

// checkGTIDs compares ledger gtids with the recorded ones and the last with wantGTID.
func (b *Bank) checkGTIDs(t testing.TB, db *sql.DB, last int64, wantGTID string) {
	t.Helper()
	rows, err := queryMaps(db, "SELECT seq, gtid FROM bank.ledger ORDER BY seq")
	if err != nil {
		t.Fatalf("bank: read ledger gtids: %v", err)
	}
	bySeq := map[int64]string{}
	for _, r := range rows {
		var seq int64
		fmt.Sscan(r["seq"], &seq)
		bySeq[seq] = r["gtid"]
		if rec := b.GTIDOf(seq); rec != "" && rec != r["gtid"] {
			t.Errorf("bank: ledger seq %d has GTID %s, but it committed as %s", seq, r["gtid"], rec)
		}
	}
	if wantGTID == "" {
		return
	}
	if b.mysql {
		b.checkGTIDSet(t, bySeq, last, wantGTID)
		return
	}
	if bySeq[last] != wantGTID {
		t.Errorf("bank: ledger ends at seq %d (GTID %q), want it to end at GTID %s (seq %d)",
			last, bySeq[last], wantGTID, b.seqOf(wantGTID))
	}
}

// seqOf returns the seq recorded with gtid, or -1.
func (b *Bank) seqOf(gtid string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s, g := range b.gtid {
		if g == gtid {
			return s
		}
	}
	return -1
}
