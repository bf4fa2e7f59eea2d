package backup

import (
	"context"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// mode is what one kind of backup does its own way: a full copy (mode_full.go) or an
// incremental on a base (mode_incremental.go). Run picks it once from the Config
// (modeFor); the engine calls it where the kinds differ and never asks which it has,
// so a kind is changed, or a new one added, in its own file.
type mode interface {
	// smallChunks says the data is read in the stream's chunk size
	// (DefaultStreamChunkSize) whatever the end: little of it is written.
	smallChunks() bool
	// begin runs once the server is known, before the end is opened: an incremental
	// learns its base and checks it is of this server.
	begin(ctx context.Context, j *job) error
	// roomKnown says what the backup writes is known before the copy, so that a
	// directory's free space is checked up front (checkRoom).
	roomKnown() bool
	// memory is what the mode's own copy holds, beyond the copy buffers.
	memory(j *job) int64
	// wholeRedo says why the backup keeps the whole redo of its copy, whatever the
	// end ("" if the three-stage copy may run).
	wholeRedo() string
	// start runs once the redo copy is open, before the data copy.
	start(ctx context.Context, j *job)
	// copyInnoDB copies InnoDB tablespace files, in parallel.
	copyInnoDB(ctx context.Context, j *job, files []srcFile) error
	// reconciler is how DDL run during the copy is reconciled on an end that can do
	// caps (reconcileDDL).
	reconciler(caps sink.Caps) reconciler
	// record says in the manifest and xtrabackup_checkpoints what kind of backup
	// this is and up to which LSN it is exact.
	record(j *job, m *manifest.Manifest, cp *xtrabackup.Checkpoints) error
	// infoFrom is xtrabackup_info's innodb_from_lsn and incremental (Y or N).
	infoFrom(m *manifest.Manifest) (lsn uint64, incremental string)
}

// modeFor is the mode cfg asks for: an incremental if it names a base or how to
// find one, else a full backup.
func modeFor(cfg Config) mode {
	if cfg.Incremental != nil || cfg.BaseFor != nil {
		return &incrementalMode{base: cfg.Incremental, baseFor: cfg.BaseFor}
	}
	return fullMode{}
}

// reconciler brings the copied tablespaces in line with the DDL that ran during the
// copy, under BLOCK_DDL (reconcileDDL): a directory's full backup (ddl.go), a
// stream's (ddl_stream.go), an incremental's (incremental.go).
type reconciler interface {
	// reconcile makes the copies match current, the server's tablespaces now, given
	// what the redo copy saw the DDL do (e).
	reconcile(ctx context.Context, j *job, current []srcFile, e ddlEffects) error
	// storedName is the name in the backup of a new whole copy of rel.
	storedName(j *job, rel string) string
}
