//go:build e2e

package mysql

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestFTWRLNeverStallsWrites runs the lock sequence on a real MySQL 8.0 with a MyISAM
// table (so BLOCK_COMMIT takes FLUSH TABLES WITH READ LOCK) while a long statement
// runs, which FTWRL would wait for with every write of the server waiting behind it:
//   - seen before the attempt: the sequence waits for it without issuing FTWRL, writes
//     go on, and FTWRL is taken once it ends;
//   - started just before the attempt (too young to be seen): FTWRL is cancelled after
//     Grant, the writes waiting behind it go on, and FTWRL is taken once it ends (the
//     writes are to another table: those to the long statement's own table wait for it
//     once FTWRL asked for its flush, cancelled or not, "Waiting for table flush");
//   - one that outlives Patience fails the sequence, naming it.
func TestFTWRLNeverStallsWrites(t *testing.T) {
	srv := testdb.StartMySQL(t, testdb.MySQLOptions{NoBinlog: true})
	db := srv.DB(t)
	srv.Exec(t, "CREATE DATABASE m")
	srv.Exec(t, "CREATE TABLE m.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
	srv.Exec(t, "CREATE TABLE m.w (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
	srv.Exec(t, "CREATE TABLE m.flat (id INT PRIMARY KEY) ENGINE=MyISAM")
	srv.Exec(t, "INSERT INTO m.t (v) VALUES (1)")
	ctx := context.Background()
	info, err := Probe(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// A statement's PROCESSLIST TIME counts whole seconds from the second it started in:
	// one 100 ms old can show 1, never 2.
	limits := FTWRLLimits{LongQuery: 2 * time.Second, Grant: time.Second, Patience: 4 * time.Second, Poll: 100 * time.Millisecond}
	// lockWith starts a sequence, a statement reading m.t sleeping for sleep, waits
	// until it has run for age, then enters BLOCK_COMMIT; it returns how long
	// BLOCK_COMMIT took, whether a write to m.w made during it (after write) ended before
	// the sleeper, the log, and the sequence's error.
	lockWith := func(t *testing.T, sleep, age, write time.Duration) (time.Duration, bool, string, error) {
		var logs bytes.Buffer
		l, err := NewBackupLock(ctx, db, info, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l.ftwrl = limits
		if _, err := l.Enter(ctx, mariadb.StageStart); err != nil {
			t.Fatal(err)
		}
		sleeper := make(chan time.Time, 1)
		go func() {
			db.ExecContext(ctx, "SELECT SLEEP(?) FROM m.t LIMIT 1", sleep.Seconds()) //nolint:errcheck // killed below when long
			sleeper <- time.Now()
		}()
		time.Sleep(age)
		var wrote time.Time
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(write)
			if _, err := db.ExecContext(ctx, "INSERT INTO m.w (v) VALUES (2)"); err != nil {
				t.Errorf("write during BLOCK_COMMIT: %v", err)
			}
			wrote = time.Now()
		}()
		t0 := time.Now()
		_, err = l.Enter(ctx, mariadb.StageBlockCommit)
		took := time.Since(t0)
		if err == nil {
			stalled := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM m.flat").Scan(new(int)) // reads go on under FTWRL
			if stalled != nil {
				t.Errorf("a read under FTWRL: %v", stalled)
			}
			if !holdsGlobalReadLock(t, db) {
				t.Error("BLOCK_COMMIT returned without FLUSH TABLES WITH READ LOCK held")
			}
			if _, err := l.Enter(ctx, mariadb.StageEnd); err != nil {
				t.Fatal(err)
			}
		}
		var id int64
		if db.QueryRowContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP%'").Scan(&id) == nil {
			db.ExecContext(ctx, "KILL QUERY ?", id) //nolint:errcheck // the sleeper may have just ended
		}
		ended := <-sleeper
		wg.Wait()
		return took, wrote.Before(ended), logs.String(), err
	}

	t.Run("seen first", func(t *testing.T) {
		took, wroteFirst, log, err := lockWith(t, 4*time.Second, 2500*time.Millisecond, 200*time.Millisecond)
		if err != nil || took < time.Second || !strings.Contains(log, "waiting for a long statement") {
			t.Fatalf("BLOCK_COMMIT: %v after %v\n%s", err, took, log)
		}
		if !wroteFirst {
			t.Error("a write made while the sequence waited for the long statement waited for it too")
		}
		if strings.Contains(log, "not granted in time") {
			t.Errorf("FTWRL was issued while the long statement ran:\n%s", log)
		}
	})
	t.Run("too young to be seen", func(t *testing.T) {
		took, wroteFirst, log, err := lockWith(t, 4*time.Second, 100*time.Millisecond, 300*time.Millisecond)
		if err != nil || !strings.Contains(log, "not granted in time") || took < 2*time.Second {
			t.Fatalf("BLOCK_COMMIT: %v after %v\n%s", err, took, log)
		}
		if !wroteFirst {
			t.Error("a write queued behind FTWRL waited for the long statement: FTWRL was not cancelled")
		}
	})
	t.Run("outlives patience", func(t *testing.T) {
		took, wroteFirst, log, err := lockWith(t, 20*time.Second, 2500*time.Millisecond, 200*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "SELECT SLEEP") || took > 10*time.Second {
			t.Fatalf("BLOCK_COMMIT = %v after %v, want a failure naming the statement within the patience\n%s", err, took, log)
		}
		if !wroteFirst {
			t.Error("a write waited for the long statement")
		}
		t.Logf("refused: %v", err)
	})
}

// holdsGlobalReadLock tells whether some session holds FLUSH TABLES WITH READ LOCK.
func holdsGlobalReadLock(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM performance_schema.metadata_locks WHERE OBJECT_TYPE = 'GLOBAL' AND LOCK_TYPE = 'SHARED'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
