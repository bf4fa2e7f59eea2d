package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Stage is a BACKUP STAGE name.
type Stage string

// The BACKUP STAGE sequence, in order.
const (
	StageStart       Stage = "START"
	StageFlush       Stage = "FLUSH"
	StageBlockDDL    Stage = "BLOCK_DDL"
	StageBlockCommit Stage = "BLOCK_COMMIT"
	StageEnd         Stage = "END"
)

// BackupLock holds the dedicated connection that runs the BACKUP STAGE sequence. The
// server releases every stage lock if this connection goes away (e.g. ferry is killed).
type BackupLock struct {
	conn  *sql.Conn
	stage Stage
	since time.Time
}

// NewBackupLock takes a dedicated connection for the stage sequence.
func NewBackupLock(ctx context.Context, db *sql.DB) (*BackupLock, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open backup-lock connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout=31536000"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set lock_wait_timeout: %w", err)
	}
	return &BackupLock{conn: conn}, nil
}

// Enter moves to stage s and returns how long the server took to grant it.
func (l *BackupLock) Enter(ctx context.Context, s Stage) (time.Duration, error) {
	t0 := time.Now()
	if _, err := l.conn.ExecContext(ctx, "BACKUP STAGE "+string(s)); err != nil {
		return 0, fmt.Errorf("BACKUP STAGE %s: %w", s, err)
	}
	l.stage, l.since = s, time.Now()
	return time.Since(t0), nil
}

// Stage returns the current stage and when it was entered.
func (l *BackupLock) Stage() (Stage, time.Time) { return l.stage, l.since }

// Conn is the locking connection; statements that must see the lock run on it.
func (l *BackupLock) Conn() *sql.Conn { return l.conn }

// ReadEnd reads, under BLOCK_COMMIT, the end LSN of the backup (Innodb_lsn_current),
// makes the redo durable up to it (FLUSH ENGINE LOGS) and reads the binlog and GTID
// coordinates that go with it.
func (l *BackupLock) ReadEnd(ctx context.Context) (uint64, Coordinates, error) {
	var name string
	var end uint64
	if err := l.conn.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'").Scan(&name, &end); err != nil {
		return 0, Coordinates{}, fmt.Errorf("read end LSN: %w", err)
	}
	if _, err := l.conn.ExecContext(ctx, "FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS"); err != nil {
		return 0, Coordinates{}, fmt.Errorf("FLUSH ENGINE LOGS: %w", err)
	}
	c, err := ReadCoordinates(ctx, l.conn)
	if err != nil {
		return 0, Coordinates{}, err
	}
	return end, c, nil
}

// Close ends the sequence (BACKUP STAGE END if still inside) and releases the connection.
func (l *BackupLock) Close() error {
	if l.stage != "" && l.stage != StageEnd {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = l.conn.ExecContext(ctx, "BACKUP STAGE END")
		l.stage = StageEnd
	}
	return l.conn.Close()
}
