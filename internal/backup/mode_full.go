package backup

import (
	"context"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// fullMode is a full backup: every tablespace copied whole, exact at its end LSN.
type fullMode struct{}

func (fullMode) smallChunks() bool                              { return false }
func (fullMode) begin(context.Context, *job) error              { return nil }
func (fullMode) roomKnown() bool                                { return true }
func (fullMode) memory(*job) int64                              { return 0 }
func (fullMode) wholeRedo() string                              { return "" }
func (fullMode) start(context.Context, *job)                    {}
func (fullMode) infoFrom(m *manifest.Manifest) (uint64, string) { return m.StartLSN, "N" }

func (fullMode) copyInnoDB(ctx context.Context, j *job, files []srcFile) error {
	return j.copyInnoDBFiles(ctx, files)
}

// reconciler: a directory's copies are changed in place; a stream's, which cannot
// be, are cancelled by markers.
func (fullMode) reconciler(caps sink.Caps) reconciler {
	if caps.Rewrite {
		return dirDDL{}
	}
	return streamDDL{}
}

func (fullMode) record(_ *job, m *manifest.Manifest, cp *xtrabackup.Checkpoints) error {
	m.Type, m.ToLSN = manifest.TypeFull, m.EndLSN
	cp.BackupType, cp.ToLSN = xtrabackup.TypeFull, m.ToLSN
	return nil
}
