package backup

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/sink"
	"golang.org/x/time/rate"
)

// DefaultMaxMemory is the default budget of the stream pipeline's block buffers.
const DefaultMaxMemory = 256 << 20

// DefaultChunkSize is the read/write size for data files. Measured with bench/backup.sh
// on a 3.5 GB sysbench set (2 cores, virtio disk): 8 MiB chunks copied an idle server in
// 4.6 s but left a concurrent write load 2% of its TPS; 256 KiB took 5.0-5.5 s and left it
// about 43% (mariadb-backup: 12-13.5 s, about 19%).
const DefaultChunkSize = 256 << 10

// DefaultStreamChunkSize is the read size for a stream: nothing is written to the
// server's disk, and 1 MiB reads matched an O_DIRECT dd (256 KiB: 1.1x its time).
const DefaultStreamChunkSize = 1 << 20

// Config is everything a backup job needs, filled by cmd/ferry from flags.
type Config struct {
	Conn mariadb.ConnConfig
	// Sink is where the backup goes: a directory (sink.NewDir), a stream
	// (stream.NewSink), a repository (repo.NewSink) or a clone's recipient. Monitor,
	// if set, is updated so the caller can watch the redo copy.
	Sink      sink.Sink
	Monitor   *Monitor
	Parallel  int   // copy workers; default number of cores
	ChunkSize int   // bytes per read and write; default DefaultChunkSize (DefaultStreamChunkSize for a stream)
	Segment   int64 // large files are split into segments copied in parallel; default 256 MiB
	MaxRate   int64 // bytes/s cap on data file reads (0: unlimited), to spare the server's disk
	// MaxImpact is the share of the server's write throughput the copy may cost (0.2
	// for --max-impact 20; 0: not watched): the data copy slows while the writes fall
	// further below what they are while it pauses. WatchRedo also slows it while the
	// server's redo log fills up ahead of the redo copy (a clone, whose redo waits on
	// the network). Either one paces the reads instead of MaxRate.
	MaxImpact float64
	WatchRedo bool
	// Limiter, when set, paces data file reads instead of MaxRate; its owner may change
	// the limit while the backup runs.
	Limiter  *rate.Limiter
	Log      *slog.Logger
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
