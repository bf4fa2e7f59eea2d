package backup

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/setting"
)

// MariaDB is the Connector of the MariaDB server conn reaches: the default of
// Config.Server. Its sessions are internal/mariadb's, its redo log is read by
// internal/redo.
func MariaDB(conn mariadb.ConnConfig) Connector { return mariadbConnector{conn} }

type mariadbConnector struct{ conn mariadb.ConnConfig }

var (
	_ Server         = mariadbServer{}
	_ BackupLock     = (*mariadb.BackupLock)(nil)
	_ ReplicaPause   = sqlThreadPause{}
	_ redo.ServerLSN = Server(nil)
)

func (c mariadbConnector) Connect(ctx context.Context) (Server, error) {
	s, err := mariadb.Connect(ctx, c.conn, mariadb.BackupPrivileges)
	if err != nil {
		return nil, err
	}
	return mariadbServer{s}, nil
}

func (c mariadbConnector) Counters(ctx context.Context) (WriteCounter, error) {
	db, err := mariadb.Dial(ctx, c.conn)
	if err != nil {
		return nil, err
	}
	return rowWrites{db}, nil
}

// mariadbServer adapts a *mariadb.Session to Server.
type mariadbServer struct{ *mariadb.Session }

func (s mariadbServer) BackupLock(ctx context.Context) (BackupLock, error) {
	l, err := s.Session.BackupLock(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (s mariadbServer) PauseReplica(ctx context.Context, timeout time.Duration) (ReplicaPause, error) {
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		return nil, setting.Errorf("%s: %w", setting.SafeSlaveBackup, err)
	}
	p, err := mariadb.PauseSQLThread(ctx, conn, timeout)
	return sqlThreadPause{p, conn}, err
}

func (s mariadbServer) Redo() RedoLog { return MariaDBRedo(s.Info()) }

func (s mariadbServer) Layout() Layout { return MariaDBLayout() }

// sqlThreadPause closes its connection once the SQL thread is started again.
type sqlThreadPause struct {
	*mariadb.SQLThreadPause
	conn *sql.Conn
}

func (p sqlThreadPause) Resume(ctx context.Context) error {
	defer p.conn.Close()
	return p.SQLThreadPause.Resume(ctx)
}

// rowWrites counts a server's writes by the redo bytes it generates (Innodb_lsn_current):
// MariaDB 10.11 reports no Innodb_rows_* counters, so a count of rows read 0 and left
// --max-impact's copy at its slow start whatever the load.
type rowWrites struct{ db *sql.DB }

func (w rowWrites) Writes(ctx context.Context) (int64, error) {
	n, err := w.RedoBytes(ctx)
	return int64(n), err
}
func (w rowWrites) Close() error { return w.db.Close() }

func (w rowWrites) RedoBytes(ctx context.Context) (uint64, error) {
	_, current, err := mariadb.LSNSource{DB: w.db}.LSNs(ctx)
	return current, err
}

// MariaDBRedo is the redo log of the MariaDB 10.8+ server info describes: its
// ib_logfile0, read and parsed by internal/redo.
func MariaDBRedo(info mariadb.Info) RedoLog { return innodbRedo{info} }

// innodbRedo is MariaDB 10.8+'s InnoDB redo log (internal/redo).
type innodbRedo struct{ info mariadb.Info }

func (r innodbRedo) Path() string {
	return filepath.Join(dirOr(r.info.Vars["innodb_log_group_home_dir"], r.info.Datadir), "ib_logfile0")
}

func (innodbRedo) Stored() string { return "ib_logfile0" }
func (innodbRedo) Parsed() bool   { return true }

func (r innodbRedo) Capacity() uint64 {
	var size uint64
	fmt.Sscan(r.info.Vars["innodb_log_file_size"], &size)
	if size <= redoHeaderBytes {
		return 0
	}
	return size - redoHeaderBytes
}

func (innodbRedo) Open(cfg redo.Config) (RedoCopy, error) { return redo.Open(cfg) }

func (innodbRedo) Checkpoint(path string) (uint64, error) {
	cp, err := redo.NewestCheckpoint(path)
	return cp.LSN, err
}
