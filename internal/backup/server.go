package backup

import (
	"context"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
)

// The server seam: the engine reaches the server it copies only through these
// interfaces (Config.Server). MariaDB(conn) is the MariaDB implementation over
// internal/mariadb; unit tests pass a fake (backuptest.Server). A server of another
// family (MySQL: LOCK INSTANCE FOR BACKUP and performance_schema.log_status for the
// lock sequence, its own redo format) is another Connector.

// Connector is the way to the server a backup copies.
type Connector interface {
	// Connect opens a session on the server, probes it and checks that the user
	// holds the backup privileges: the one server probe.
	Connect(ctx context.Context) (Server, error)
	// Counters opens a connection of its own that reads the server's write counters
	// for the throttle (Config.MaxImpact) or the default pace, which poll it while the
	// copy runs.
	Counters(ctx context.Context) (WriteCounter, error)
}

// Server is one session on the server a backup copies.
type Server interface {
	// Info is what the probe found: version, variables, datadir, page size.
	Info() mariadb.Info
	// LSNs are the server's durable (flushed) and current LSN: what bounds the redo
	// copy and tells how far the server is ahead of it (it is a redo.ServerLSN).
	LSNs(ctx context.Context) (flushed, current uint64, err error)
	// ReplicaSources reads where the server replicates from (none if it is not a
	// replica), for --slave-info.
	ReplicaSources(ctx context.Context) ([]mariadb.ReplicaSource, error)
	// PauseReplica stops a replica's SQL thread once it has no temporary tables open
	// (--safe-slave-backup), waiting at most timeout; a server that is not a replica
	// is left alone. A non-nil pause is resumed even when err is set.
	PauseReplica(ctx context.Context, timeout time.Duration) (ReplicaPause, error)
	// BackupLock starts the backup lock sequence on a connection of its own.
	BackupLock(ctx context.Context) (BackupLock, error)
	// Redo is the server's redo log: its format and how it is read.
	Redo() RedoLog
	// Layout is where the server keeps its files and when each is copied.
	Layout() Layout
	Close() error
}

// BackupLock is the server side of the stage sequence: the locks the copy takes in
// order (BACKUP STAGE START, FLUSH, BLOCK_DDL, BLOCK_COMMIT, END on MariaDB) and what
// is read under BLOCK_COMMIT. Close ends the sequence if it is still inside it.
type BackupLock interface {
	stageLock
	Close() error
}

// stageLock is the part of BackupLock the stages use. Unit tests fake it.
type stageLock interface {
	// Enter moves to stage s and returns how long the server took to grant it.
	Enter(ctx context.Context, s mariadb.Stage) (time.Duration, error)
	// ReadEnd reads, with commits blocked, the end LSN (durable once it returns) and
	// the binlog and GTID coordinates that go with it.
	ReadEnd(ctx context.Context) (endLSN uint64, c mariadb.Coordinates, err error)
}

// ReplicaPause is a replica's SQL thread stopped by PauseReplica.
type ReplicaPause interface {
	// Stopped tells whether the thread was stopped (and Resume will start it).
	Stopped() bool
	// Resume starts the thread again if it was stopped, and releases the pause.
	Resume(ctx context.Context) error
}

// WriteCounter reads how much the server has written since it started.
type WriteCounter interface {
	// Writes counts the server's writes (the throttle's signal): any counter that every
	// write adds to; MariaDB's is its redo bytes.
	Writes(ctx context.Context) (int64, error)
	// RedoBytes is the server's current LSN: the redo bytes it has generated, which
	// every change adds to (the pace's signal; it stands still on an idle server).
	RedoBytes(ctx context.Context) (uint64, error)
	Close() error
}

// RedoLog reads a server's redo log, where the backup copies it from.
type RedoLog interface {
	// Path is where the server keeps its log (MariaDB's ib_logfile0, MySQL's
	// #innodb_redo directory): what Open and Checkpoint are given.
	Path() string
	// Stored is the name of the backup's copy of the log (ib_logfile0,
	// xtrabackup_logfile).
	Stored() string
	// Parsed tells whether the copy parses the log's mini-transactions: it then reports
	// the file operations and the pages they touch (Config.OnFileOp, Config.Pages), which
	// the three-stage copy, the roll-forward and DDL tracking need. A log copied block by
	// block (MySQL's) reports neither: its backups keep the whole redo and hold DDL off
	// for the whole copy.
	Parsed() bool
	// Capacity is how many bytes of redo the server keeps before it overwrites them (0:
	// unknown).
	Capacity() uint64
	// Open opens the log at its newest checkpoint for a copy (a *redo.Tailer).
	Open(cfg redo.Config) (RedoCopy, error)
	// Checkpoint reads the LSN of the newest checkpoint in the log at path.
	Checkpoint(path string) (uint64, error)
}

// RedoCopy is what the engine asks of a redo copy (*redo.Tailer). Unit tests fake it.
type RedoCopy interface {
	Run(ctx context.Context) error
	StopAt(lsn uint64)
	Copied() uint64
	WaitCopied(ctx context.Context, lsn uint64) error
	Start() redo.Checkpoint
	EndLSN() uint64
}
