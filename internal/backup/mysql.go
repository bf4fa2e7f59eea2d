package backup

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/mysql"
	"github.com/ferry-backup/ferry/internal/mysqlredo"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// Detect is the Connector of the server conn reaches, whichever its family: it asks
// the server what it is (SELECT VERSION(), @@version_comment) and goes on as the
// MariaDB or the MySQL Connector. It is Config.Server's default.
func Detect(conn mariadb.ConnConfig, log *slog.Logger) Connector {
	return detectConnector{conn: conn, log: log}
}

type detectConnector struct {
	conn mariadb.ConnConfig
	log  *slog.Logger
}

func (c detectConnector) Connect(ctx context.Context) (Server, error) {
	db, err := mariadb.Dial(ctx, c.conn)
	if err != nil {
		return nil, err
	}
	var version, comment string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&version, &comment); err != nil {
		db.Close()
		return nil, fmt.Errorf("read server version: %w", err)
	}
	if !mysql.IsMySQL(version, comment) {
		db.Close()
		return MariaDB(c.conn).Connect(ctx)
	}
	user := c.conn.User
	s, err := mysql.Open(ctx, db, user, c.log)
	if err != nil {
		return nil, err
	}
	return mysqlServer{s}, nil
}

func (c detectConnector) Counters(ctx context.Context) (WriteCounter, error) {
	db, err := mariadb.Dial(ctx, c.conn)
	if err != nil {
		return nil, err
	}
	var version, comment string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&version, &comment); err != nil {
		db.Close()
		return nil, fmt.Errorf("read server version: %w", err)
	}
	if mysql.IsMySQL(version, comment) {
		return mysqlWrites{mysql.LSNs{DB: db}, db.Close}, nil
	}
	return rowWrites{db}, nil
}

// mysqlWrites counts a MySQL server's writes by its redo bytes.
type mysqlWrites struct {
	lsn   mysql.LSNs
	close func() error
}

func (w mysqlWrites) Writes(ctx context.Context) (int64, error) {
	n, err := w.RedoBytes(ctx)
	return int64(n), err
}

func (w mysqlWrites) RedoBytes(ctx context.Context) (uint64, error) {
	_, cur, err := w.lsn.LSNs(ctx)
	return cur, err
}

func (w mysqlWrites) Close() error { return w.close() }

// mysqlServer adapts a *mysql.Session to Server.
type mysqlServer struct{ *mysql.Session }

var _ Server = mysqlServer{}

func (s mysqlServer) BackupLock(ctx context.Context) (BackupLock, error) {
	l, err := s.Session.BackupLock(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (s mysqlServer) ReplicaSources(context.Context) ([]mariadb.ReplicaSource, error) {
	return nil, fmt.Errorf("recording a MySQL replica's source is not supported yet")
}

func (s mysqlServer) PauseReplica(context.Context, time.Duration) (ReplicaPause, error) {
	return nil, fmt.Errorf("stopping a MySQL replica's SQL thread is not supported yet")
}

func (s mysqlServer) Redo() RedoLog { return mysqlRedoLog{s.Info()} }

func (s mysqlServer) Layout() Layout { return mysqlLayout{} }

// mysqlRedoLog is MySQL 8.0.30+'s #innodb_redo, copied block by block by
// internal/mysqlredo into XtraBackup's xtrabackup_logfile.
type mysqlRedoLog struct{ info mariadb.Info }

func (r mysqlRedoLog) Path() string {
	return filepath.Join(dirOr(r.info.Vars["innodb_log_group_home_dir"], r.info.Datadir), "#innodb_redo")
}

func (mysqlRedoLog) Stored() string { return xtrabackup.LogFile }
func (mysqlRedoLog) Parsed() bool   { return false }

func (r mysqlRedoLog) Capacity() uint64 {
	n, _ := strconv.ParseUint(r.info.Vars["innodb_redo_log_capacity"], 10, 64)
	return n
}

func (r mysqlRedoLog) Open(cfg redo.Config) (RedoCopy, error) {
	return mysqlredo.Open(mysqlredo.Config{Dir: cfg.Path, Out: cfg.Out, Server: cfg.Server,
		Creator: "ferry " + cfg.Creator, Poll: cfg.Poll, ReadSize: cfg.ReadSize})
}

func (mysqlRedoLog) Checkpoint(path string) (uint64, error) { return mysqlredo.Checkpoint(path) }
