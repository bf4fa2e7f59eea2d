package backup

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/ferry-backup/ferry/internal/clock"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/sink"
)

// DefaultMaxMemory is the default budget of the stream pipeline's block buffers.
const DefaultMaxMemory = defaults.PipelineMemory

// DefaultChunkSize is the read/write size for data files written to the server's disks
// (a directory); defaults.ChunkSize says why.
const DefaultChunkSize = defaults.ChunkSize

// DefaultStreamChunkSize is the read size for an end that writes nothing to the
// server's disks (a stream, a repository, a clone) or little (an incremental).
const DefaultStreamChunkSize = defaults.RemoteChunkSize

// Config is everything a backup job needs, filled by cmd/ferry from flags.
type Config struct {
	// Server is the server the backup copies (the server seam, server.go); by
	// default MariaDB(Conn), the MariaDB server Conn reaches.
	Server Connector
	Conn   mariadb.ConnConfig
	// Sink is where the backup goes: a directory (sink.NewDir), a stream
	// (stream.NewSink), a repository (repo.NewSink) or a clone's recipient. Monitor,
	// if set, is updated so the caller can watch the redo copy.
	Sink      sink.Sink
	Monitor   *Monitor
	Parallel  int   // copy workers; default defaults.BackupParallel (1; a donor sets its own)
	ChunkSize int   // bytes per read and write; default DefaultChunkSize (DefaultStreamChunkSize on a Remote end or for an incremental)
	Segment   int64 // large files are split into segments copied in parallel; default defaults.Segment
	MaxRate   int64 // bytes/s cap on data file reads (0: unlimited), to spare the server's disk
	// MaxImpact is the share of the server's write throughput the copy may cost (0.2
	// for --max-impact 20; 0: not watched): the data copy slows while the writes fall
	// further below what they are while it pauses. WatchRedo also slows it while the
	// server's redo log fills up ahead of the redo copy (a clone, whose redo waits on
	// the network). Either one paces the reads instead of MaxRate.
	MaxImpact float64
	WatchRedo bool
	// Unpaced copies at full speed whatever the server's load. By default (neither
	// MaxRate nor MaxImpact nor WatchRedo) the data copy is paced: at full speed on an
	// idle server, and backing off while a writing server's writes fall a quarter below
	// their rate just before the copy.
	Unpaced bool
	Log     *slog.Logger
	// Clock is the job's time: when it starts and ends, how long the locks are held,
	// what the three-stage copy measures rates against. Default the wall clock; unit
	// tests pass a *clock.Fake. The throttle's pauses and re-read waits stay real.
	Clock    clock.Clock
	Progress io.Writer // where progress is drawn (stderr)
	Terminal bool      // Progress is a terminal
	// Spool is where the redo copy waits for a slow end: its directory (default the
	// system temp dir) and most bytes (default nine tenths of the space free there).
	Spool SpoolOptions
	// Keys, if set, are the key files that read a server's encrypted redo log
	// (innodb_encrypt_log=ON); by default the server's own file_key_management files.
	Keys keyfile.Files
	// FullRedo turns the three-stage copy off: the backup keeps the whole redo of
	// the copy, even on an end that could take re-copied pages.
	FullRedo bool
	// RedoArchive says whether a MySQL server's redo log archive carries the redo copy
	// (innodb_redo_log_archive_start; then the server cannot overwrite redo the copy
	// has not read): "" or RedoArchiveAuto uses the first directory of
	// innodb_redo_log_archive_dirs when the server has one and the user may
	// (INNODB_REDO_LOG_ARCHIVE), RedoArchiveOff never, any other value is the label
	// of the directory to use, and the backup fails if it cannot. MariaDB has none.
	RedoArchive string
	// KeepFreePages copies the pages of .ibd files that their extent descriptors mark
	// free as they are, instead of storing zeros (freepages.go).
	KeepFreePages bool
	// Incremental, if set, makes the backup an incremental on this base: a .delta and
	// .meta per tablespace holding the pages changed since (docs/incremental.md).
	Incremental *Base
	// BaseFor, if set, chooses the incremental's base once the server is known (by
	// its @@server_uid): a repository's newest backup of this server.
	BaseFor func(ctx context.Context, serverUID string) (*Base, error)
	// TrackerStall is a test hook: the three-stage copy's page tracker stalls this
	// long before it reads any redo, so that the server laps it and the page-LSN
	// fallback runs (a cmd/ferry built with -tags testhooks sets it from
	// FERRY_TEST_TRACKER_STALL; a production build never does).
	TrackerStall time.Duration
	// LeaveOut is a test hook: the backup leaves out the server's files at these
	// paths (relative to the datadir) as if they were not there, so that a test makes
	// a backup that verifies but restores without a table (a cmd/ferry built with
	// -tags testhooks sets it from FERRY_TEST_LEAVE_OUT; a production build never does).
	LeaveOut []string
	// Filter, if set, makes a partial backup of the tables it selects.
	Filter *Filter
	// Replica is what a backup of a replica records and does (--slave-info,
	// --safe-slave-backup).
	Replica ReplicaOptions
	Version string // ferry version, recorded in metadata
	Command string // command line without secrets, recorded in xtrabackup_info
}

// ReplicaOptions say what a backup of a replica records and does.
type ReplicaOptions struct {
	// Info records the replica's sources and their positions under BLOCK_COMMIT in the
	// manifest and in xtrabackup_slave_info (--slave-info).
	Info bool
	// BestEffort records them only if the user may read them: a clone donor offers
	// them to a recipient that may want them, without needing REPLICA MONITOR.
	BestEffort bool
	// SafeSlave stops the SQL thread from BLOCK_DDL to the end of BLOCK_COMMIT
	// (--safe-slave-backup), once it has no temporary tables open; SafeSlaveTimeout
	// bounds the wait for that (default 300 s).
	SafeSlave        bool
	SafeSlaveTimeout time.Duration
}

// SpoolOptions place and bound the redo spool.
type SpoolOptions struct {
	Dir string
	Max int64
}
