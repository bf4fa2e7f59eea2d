package backup

import (
	"context"
	"database/sql"
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

// Config.RedoArchive's two fixed values; any other is a label of
// innodb_redo_log_archive_dirs.
const (
	RedoArchiveAuto = "auto"
	RedoArchiveOff  = "off"
)

// Detect is the Connector of the server conn reaches, whichever its family: it asks
// the server what it is (SELECT VERSION(), @@version_comment) and goes on as the
// MariaDB or the MySQL Connector, which uses MySQL's redo log archive as
// redoArchive says (Config.RedoArchive). It is Config.Server's default.
func Detect(conn mariadb.ConnConfig, log *slog.Logger, redoArchive string) Connector {
	return detectConnector{conn: conn, log: log, archive: redoArchive}
}

type detectConnector struct {
	conn    mariadb.ConnConfig
	log     *slog.Logger
	archive string
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
	return mysqlServer{Session: s, log: c.log, archive: c.archive}, nil
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
type mysqlServer struct {
	*mysql.Session
	log     *slog.Logger
	archive string // Config.RedoArchive
}

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

func (s mysqlServer) Redo() RedoLog {
	return mysqlRedoLog{info: s.Info(), db: s.DB(), log: s.log, archive: s.archive}
}

func (s mysqlServer) Layout() Layout { return mysqlLayout{} }

// mysqlRedoLog is MySQL 8.0.30+'s #innodb_redo, copied block by block by
// internal/mysqlredo into XtraBackup's xtrabackup_logfile, from the server's redo
// log archive once it can (archive).
type mysqlRedoLog struct {
	info    mariadb.Info
	db      *sql.DB
	log     *slog.Logger
	archive string // Config.RedoArchive
}

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
	arch, err := r.startArchive()
	if err != nil {
		return nil, err
	}
	mc := mysqlredo.Config{Dir: cfg.Path, Out: cfg.Out, Server: cfg.Server,
		Creator: "ferry " + cfg.Creator, Poll: cfg.Poll, ReadSize: cfg.ReadSize}
	if arch != nil {
		mc.Archive = arch
		r.awaitCheckpoint(cfg)
	}
	t, err := mysqlredo.Open(mc)
	switch {
	case err != nil && arch != nil:
		arch.Stop(context.Background()) //nolint:errcheck // Open's error says more
		return nil, err
	case err != nil:
		return nil, err
	case arch == nil:
		return t, nil
	}
	return archivedCopy{Tailer: t, arch: arch, log: r.log}, nil
}

// startArchive starts the server's redo log archive for a copy as Config.RedoArchive
// says: nil when it is not used (in auto, why is logged).
func (r mysqlRedoLog) startArchive() (*mysqlredo.Archive, error) {
	if r.archive == RedoArchiveOff || r.db == nil {
		return nil, nil
	}
	auto := r.archive == "" || r.archive == RedoArchiveAuto
	dirs := r.info.Vars["innodb_redo_log_archive_dirs"]
	d, ok := archiveDir(mysqlredo.ParseArchiveDirs(dirs), r.archive, auto)
	switch {
	case !ok && auto:
		r.log.Info("redo: the server has no redo log archive directory (innodb_redo_log_archive_dirs): the copy reads the redo files, and a copy slower than the server's writes can be lapped")
		return nil, nil
	case !ok:
		return nil, fmt.Errorf("the server's innodb_redo_log_archive_dirs (%q) has no label %q: add it on the server, or choose another label or auto", dirs, r.archive)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := r.db.Conn(ctx)
	if err == nil {
		var a *mysqlredo.Archive
		if a, err = mysqlredo.StartArchive(ctx, conn, d); err == nil {
			r.log.Info("redo: the server archives its redo log for this copy, which cannot be lapped from the archive's start", "file", a.Path())
			return a, nil
		}
	}
	if !auto {
		return nil, err
	}
	r.log.Warn("redo: not using the server's redo log archive: the copy reads the redo files", "err", err)
	return nil, nil
}

// archiveWait bounds how long a copy waits for the checkpoint to pass the archive's
// start (awaitCheckpoint).
const archiveWait = 5 * time.Second

// awaitCheckpoint waits, at most archiveWait, until the server's checkpoint has passed
// the LSN current just after its archive started, so that the copy starts inside the
// archive: the redo between the checkpoint and the archive's first block is only in the
// redo files, which a server writing fast through a small log consumes within moments
// (seen in e2e: a clone donor lapped 0.5 s into the copy). A busy server checkpoints
// every second; a server whose checkpoint stays behind writes slowly or has a large log,
// and the copy then reads that stretch from the files, as without an archive.
func (r mysqlRedoLog) awaitCheckpoint(cfg redo.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), archiveWait)
	defer cancel()
	_, cur, err := cfg.Server.LSNs(ctx)
	for err == nil {
		var cp uint64
		if cp, err = mysqlredo.Checkpoint(cfg.Path); err == nil && cp >= cur {
			return
		}
		select {
		case <-ctx.Done():
			r.log.Info("redo: the checkpoint has not passed the archive's start yet: the copy reads the redo before it from the files", "checkpoint", cp, "archive_from", cur)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// archiveDir picks the archive directory: the one labelled want, or in auto the first.
func archiveDir(dirs []mysqlredo.ArchiveDir, want string, auto bool) (mysqlredo.ArchiveDir, bool) {
	for _, d := range dirs {
		if auto || d.Label == want {
			return d, true
		}
	}
	return mysqlredo.ArchiveDir{}, false
}

// archivedCopy is a redo copy that follows the server's redo log archive; Run stops
// the archive when the copy ends.
type archivedCopy struct {
	*mysqlredo.Tailer
	arch *mysqlredo.Archive
	log  *slog.Logger
}

func (c archivedCopy) Run(ctx context.Context) error {
	err := c.Tailer.Run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if serr := c.arch.Stop(sctx); serr != nil {
		c.log.Warn("redo: stopping the server's redo log archive", "err", serr)
	}
	if at := c.ArchiveStart(); at != 0 && err == nil {
		c.log.Info("redo: copied from the server's redo log archive", "from_lsn", at, "archived_bytes", c.Copied()-min(at, c.Copied()))
	}
	return err
}

func (mysqlRedoLog) Checkpoint(path string) (uint64, error) { return mysqlredo.Checkpoint(path) }
