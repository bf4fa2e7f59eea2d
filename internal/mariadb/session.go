package mariadb

import (
	"context"
	"database/sql"
)

// Session is a connection pool to one probed server: what an engine (a backup, a
// clone donor) reaches its server through. backup.MariaDB adapts it to the backup's
// seam (backup.Server).
type Session struct {
	db   *sql.DB
	info Info
}

// Connect resolves c, connects, probes the server (Probe) and checks that c's user
// holds want (CheckPrivileges): the one server probe of a backup and of ferry serve.
func Connect(ctx context.Context, c ConnConfig, want []string) (*Session, error) {
	conn, err := c.Resolve()
	if err != nil {
		return nil, err
	}
	db, err := Open(ctx, conn)
	if err != nil {
		return nil, err
	}
	info, err := Probe(ctx, db)
	if err == nil {
		err = CheckPrivileges(ctx, db, conn.User, want)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Session{db: db, info: info}, nil
}

// Dial resolves c and connects, without a probe: a second connection to a server
// already probed (a throttle's).
func Dial(ctx context.Context, c ConnConfig) (*sql.DB, error) {
	conn, err := c.Resolve()
	if err != nil {
		return nil, err
	}
	return Open(ctx, conn)
}

// DB is the session's connection pool.
func (s *Session) DB() *sql.DB { return s.db }

// Info is what the probe found.
func (s *Session) Info() Info { return s.info }

// LSNs returns Innodb_lsn_flushed and Innodb_lsn_current (LSNSource).
func (s *Session) LSNs(ctx context.Context) (flushed, current uint64, err error) {
	return LSNSource{DB: s.db}.LSNs(ctx)
}

// ReplicaSources reads where the server replicates from (ReadReplicaSources).
func (s *Session) ReplicaSources(ctx context.Context) ([]ReplicaSource, error) {
	return ReadReplicaSources(ctx, s.db)
}

// BackupLock starts a BACKUP STAGE sequence on a connection of its own (NewBackupLock).
func (s *Session) BackupLock(ctx context.Context) (*BackupLock, error) {
	return NewBackupLock(ctx, s.db)
}

// Close closes the connection pool.
func (s *Session) Close() error { return s.db.Close() }
