package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// FTWRLLimits bound FLUSH TABLES WITH READ LOCK, which a backup takes only while
// non-InnoDB files are copied. While the statement waits to be granted (for every
// running statement to finish), every write of the server waits behind it: a report
// running for an hour would stall the server for that hour. So the lock sequence
// waits, before issuing it, until no statement has run for LongQuery or more; gives it
// Grant to be granted, then cancels it (KILL QUERY), which frees the writes at once,
// and waits again; and fails the backup, naming the statement in the way, once
// Patience is spent.
type FTWRLLimits struct {
	LongQuery time.Duration // a statement running this long blocks the attempt (PROCESSLIST's whole seconds)
	Grant     time.Duration // most time one attempt may make writes wait
	Patience  time.Duration // most time spent waiting for long statements, all attempts
	Poll      time.Duration // how often the running statements are looked at
}

// DefaultFTWRLLimits are the limits of a backup: writes wait at most 5 s per attempt.
// A statement counts as long from 2 s: PROCESSLIST's TIME counts whole seconds from
// the second a statement started in, so 1 is also what a 10 ms statement can show.
func DefaultFTWRLLimits() FTWRLLimits {
	return FTWRLLimits{LongQuery: 2 * time.Second, Grant: 5 * time.Second, Patience: 5 * time.Minute, Poll: 200 * time.Millisecond}
}

// errInterrupted is MySQL's ER_QUERY_INTERRUPTED: the statement was killed.
const errInterrupted = 1317

// flushWithReadLock takes FLUSH TABLES WITH READ LOCK within l.ftwrl's limits.
func (l *BackupLock) flushWithReadLock(ctx context.Context) error {
	deadline := time.Now().Add(l.ftwrl.Patience)
	for {
		if err := l.waitLongQueries(ctx, deadline); err != nil {
			return err
		}
		granted, err := l.tryFTWRL(ctx)
		if granted || err != nil {
			return err
		}
		l.log.Warn("FLUSH TABLES WITH READ LOCK was not granted in time: cancelled so that the server's writes go on; waiting for the statements before it to end", "waited", l.ftwrl.Grant)
		if time.Now().After(deadline) {
			return fmt.Errorf("FLUSH TABLES WITH READ LOCK, needed while the non-InnoDB tables are copied, was never granted within %v without stalling the server's writes: retry when the server is quieter, or convert those tables to InnoDB", l.ftwrl.Patience)
		}
	}
}

// tryFTWRL issues FLUSH TABLES WITH READ LOCK on the lock's connection and, if it is
// not granted within Grant, kills it from another connection (cancelling the context
// would close the connection, and with it the instance lock). It reports false for a
// killed attempt.
func (l *BackupLock) tryFTWRL(ctx context.Context) (bool, error) {
	var mu sync.Mutex
	done := false
	timer := time.AfterFunc(l.ftwrl.Grant, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, err := l.db.ExecContext(kctx, fmt.Sprintf("KILL QUERY %d", l.connID)); err != nil {
				l.log.Warn("cancelling FLUSH TABLES WITH READ LOCK", "err", err)
			}
		}
	})
	err := l.exec(ctx, "FLUSH TABLES WITH READ LOCK")
	mu.Lock()
	done = true
	mu.Unlock()
	timer.Stop()
	var me *gomysql.MySQLError
	if errors.As(err, &me) && me.Number == errInterrupted {
		// A statement FTWRL waited for when it was killed leaves it holding the
		// global read lock, with the error [8.0.31]: writes would wait on.
		return false, l.exec(ctx, "UNLOCK TABLES")
	}
	return err == nil, err
}

// waitLongQueries waits until no statement other than ferry's has been running for
// LongQuery or more, and fails once deadline passes.
func (l *BackupLock) waitLongQueries(ctx context.Context, deadline time.Time) error {
	logged := false
	for {
		id, secs, info, err := l.longestQuery(ctx)
		if err != nil || id == 0 {
			return err
		}
		if !logged {
			l.log.Info("waiting for a long statement to end before FLUSH TABLES WITH READ LOCK, which would make every write wait behind it",
				"id", id, "running", time.Duration(secs)*time.Second, "statement", info)
			logged = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("FLUSH TABLES WITH READ LOCK, needed while the non-InnoDB tables are copied, would make every write of the server wait behind statement %d (running for %d s: %q), which did not end within %v: retry when it has ended, or convert those tables to InnoDB", id, secs, info, l.ftwrl.Patience)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(l.ftwrl.Poll):
		}
	}
}

// longestQuery returns the longest-running statement of another session that has run
// for LongQuery or more (0 if none): FLUSH TABLES WITH READ LOCK would wait for it.
// A DDL waiting for the instance lock does not count: FLUSH TABLES WITH READ LOCK
// cancels it (it then fails with a deadlock error).
func (l *BackupLock) longestQuery(ctx context.Context) (id uint64, secs int64, info string, err error) {
	const q = `SELECT ID, TIME, COALESCE(LEFT(INFO, 120), '') FROM information_schema.PROCESSLIST
		WHERE COMMAND IN ('Query', 'Execute') AND TIME >= ? AND ID <> CONNECTION_ID() AND ID <> ?
		AND COALESCE(STATE, '') <> 'Waiting for backup lock' ORDER BY TIME DESC LIMIT 1`
	minSecs := max(int64(l.ftwrl.LongQuery/time.Second), 1)
	err = l.db.QueryRowContext(ctx, q, minSecs, l.connID).Scan(&id, &secs, &info)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, "", nil
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("list the server's running statements before FLUSH TABLES WITH READ LOCK: %w", err)
	}
	return id, secs, info, nil
}
