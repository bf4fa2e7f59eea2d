package testdb

import (
	"context"
	"database/sql"
	"sync"
	"testing"
)

// Workload runs the bank, the non-InnoDB writers and the DDL loop together, as a busy
// server under backup.
type Workload struct {
	Bank    *Bank
	Mix     *Mix
	DDL     *DDL
	domain  uint32
	threads int
	stop    context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
}

// NewWorkload creates the workloads' tables on db; bank transfers go to GTID domain
// with threads sessions.
func NewWorkload(t testing.TB, db *sql.DB, domain uint32, threads int) *Workload {
	return &Workload{Bank: NewBank(t, db, BankOptions{Accounts: 200, Domain: domain}), Mix: NewMix(t, db),
		DDL: NewDDL(t, db), domain: domain, threads: threads}
}

// Start runs every workload in the background until Stop.
func (w *Workload) Start() {
	ctx, stop := context.WithCancel(context.Background())
	w.stop, w.errs = stop, make(chan error, 3)
	for _, run := range []func(context.Context) error{
		func(c context.Context) error { return w.Bank.Run(c, w.threads) },
		w.Mix.Run,
		w.DDL.Run,
	} {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.errs <- run(ctx) }()
	}
}

// Stop ends the workloads and fails the test if one of them failed.
func (w *Workload) Stop(t testing.TB) {
	t.Helper()
	w.stop()
	w.wg.Wait()
	close(w.errs)
	for err := range w.errs {
		if err != nil {
			t.Fatalf("workload: %v", err)
		}
	}
}

// Check runs every workload's invariant checks on a restored copy whose backup
// recorded gtid (the full GTID position; on MySQL the gtid_executed set).
func (w *Workload) Check(t testing.TB, db *sql.DB, gtid string) {
	t.Helper()
	want := GTIDForDomain(gtid, w.domain)
	if w.Bank.mysql {
		want = gtid
	}
	w.Bank.Check(t, db, want)
	w.Mix.Check(t, db)
	w.DDL.Check(t, db)
}
