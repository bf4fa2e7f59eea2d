// Package defaults is the one place for ferry's tunable defaults. The engines fall back
// to these values when a setting is left zero, and cmd/ferry's flags start from them and
// print them in their help, so the two cannot disagree (cmd/ferry's defaults_test checks
// every flag against this table).
//
// Each value says why it is what it is; the measurements are in bench/README.md.
package defaults

import (
	"runtime"
	"time"
)

// Backup copy.
const (
	// BackupParallel is a backup's copy workers. One reader of ChunkSize direct reads
	// keeps a disk busy; raise it for an idle server or a fast array. What a busy server
	// keeps is the pace's part (internal/backup/pace.go).
	BackupParallel = 1
	// ChunkSize is the size of a data-file read and write when the backup is written to
	// the server's disks (a directory): 8 MiB chunks copied an idle server in 4.6 s but
	// left a concurrent write load 2 % of its TPS; 256 KiB took 5.0-5.5 s and left it
	// about 43 % (mariadb-backup: 12-13.5 s, about 19 %).
	ChunkSize = 256 << 10
	// RemoteChunkSize is the read size when the backup writes nothing to the server's
	// disks (a stream, a repository, a clone) or little (an incremental): 1 MiB reads
	// matched an O_DIRECT dd (256 KiB: 1.1x its time; 4 MiB: no faster).
	RemoteChunkSize = 1 << 20
	// Segment is the size above which a file is split into segments copied in parallel
	// (on an end that can take a file's parts out of order).
	Segment = 256 << 20
	// SafeSlaveTimeout bounds the wait for a replica to have no temporary tables open
	// before its SQL thread is stopped.
	SafeSlaveTimeout = 300 * time.Second
)

// DonorParallel is the copy workers of a clone or SST donor: one per core. They kept
// it when the backup's default became 1 (bench/README.md): a recipient, or a joining
// node, waits for the copy; the load cost of one per core was measured for backups only.
func DonorParallel() int { return runtime.NumCPU() }

// Encoding and repository writes.
const (
	// PipelineMemory is the memory of a stream's or repository's encoding pipeline
	// (blocks; for a repository also parts, packs and uploads).
	PipelineMemory = 256 << 20
	// PartSize is the raw bytes of a file per stored part of a repository (smaller
	// files are packed together).
	PartSize = 32 << 20
	// Uploads is the most objects uploading to a repository at once; the writer starts
	// with 2 and adds one whenever parts wait for the link.
	Uploads = 16
)

// Clone.
const (
	// CloneStreams is the parallel connections of a clone.
	CloneStreams = 4
	// CloneMemory is the raw bytes of frames a donor holds not yet acknowledged, per
	// clone.
	CloneMemory = 64 << 20
	// CloneGrace is how long a clone waits for a lost peer to reconnect.
	CloneGrace = 60 * time.Second
)

// Restore and verify.
const (
	// Downloads is the objects a restore or verify reads from a repository at once:
	// downloads wait on the link, not on the disk.
	Downloads = 8
)

// RestoreParallel is the files a restore copies at once from a backup directory: one
// per core.
func RestoreParallel() int { return runtime.NumCPU() }

// ReplayThreads is the parallel applier threads of a point-in-time restore's binlog
// replay: twice the cores, as the applier's threads wait on the disk in turn.
func ReplayThreads() int { return 2 * runtime.NumCPU() }
