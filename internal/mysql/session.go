package mysql

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// Session is a connection pool to one probed MySQL server.
type Session struct {
	db   *sql.DB
	info mariadb.Info
	log  *slog.Logger
}

// Open probes the server db reaches (Probe), checks user's grants (CheckGrants) and
// the tables' features (CheckFeatures): the one server probe of a MySQL backup. The
// session owns db from here, also on failure.
func Open(ctx context.Context, db *sql.DB, user string, log *slog.Logger) (*Session, error) {
	info, err := Probe(ctx, db)
	if err == nil {
		err = CheckGrants(ctx, db, user)
	}
	if err == nil {
		err = CheckFeatures(ctx, db, info.Datadir)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Session{db: db, info: info, log: log}, nil
}

// DB is the session's connection pool.
func (s *Session) DB() *sql.DB { return s.db }

// Info is what the probe found.
func (s *Session) Info() mariadb.Info { return s.info }

// LSNs returns InnoDB's flushed and current LSN.
func (s *Session) LSNs(ctx context.Context) (flushed, current uint64, err error) {
	return LSNs{DB: s.db}.LSNs(ctx)
}

// BackupLock starts the lock sequence on a connection of its own.
func (s *Session) BackupLock(ctx context.Context) (*BackupLock, error) {
	return NewBackupLock(ctx, s.db, s.info, s.log)
}

// Close closes the connection pool.
func (s *Session) Close() error { return s.db.Close() }
