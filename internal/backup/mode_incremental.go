package backup

import (
	"context"
	"errors"

	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// incrementalMode is an incremental on a base (docs/incremental.md, incremental.go):
// a .delta and .meta per tablespace holding the pages changed since the base.
type incrementalMode struct {
	base *Base
	// baseFor, if set, chooses base once the server is known (Config.BaseFor).
	baseFor func(ctx context.Context, serverUID string) (*Base, error)
	sel     *selection // the changed pages, learned at start
}

func (*incrementalMode) smallChunks() bool { return true }
func (*incrementalMode) roomKnown() bool   { return false }

func (m *incrementalMode) begin(ctx context.Context, j *job) error {
	if m.baseFor != nil {
		b, err := m.baseFor(ctx, j.info.Vars["server_uid"])
		if err != nil {
			return err
		}
		m.base = b
	}
	if m.base == nil {
		return errors.New("backup: an incremental without a base (internal error)")
	}
	return m.checkBase(ctx, j)
}

// memory: each delta writer holds one cluster of pages.
func (*incrementalMode) memory(j *job) int64 {
	return int64(j.cfg.Parallel) * int64(delta.ClusterPages(j.info.PageSize)+1) * int64(j.info.PageSize)
}

func (*incrementalMode) wholeRedo() string {
	return "an incremental keeps the redo of its copy, which reads only the changed pages"
}

func (m *incrementalMode) start(ctx context.Context, j *job) { m.sel = m.selectPages(ctx, j) }

func (m *incrementalMode) copyInnoDB(ctx context.Context, j *job, files []srcFile) error {
	return m.copyDeltas(ctx, j, files)
}

// reconciler: deltas, on any end.
func (*incrementalMode) reconciler(sink.Caps) reconciler { return deltaDDL{} }

// record: the incremental is exact from its base's end up to the server's newest
// checkpoint (or its end LSN, if that came first), never below its base's end.
func (m *incrementalMode) record(j *job, mf *manifest.Manifest, cp *xtrabackup.Checkpoints) error {
	c, err := j.checkpoint()
	if err != nil {
		return err
	}
	b := m.base
	mf.ToLSN = max(b.ToLSN, min(c, mf.EndLSN))
	mf.Type = manifest.TypeIncremental
	mf.Incremental = &manifest.Incremental{BaseID: b.ID, BaseToLSN: b.ToLSN, FromLSN: m.sel.from, Method: m.sel.method()}
	cp.BackupType, cp.ToLSN, cp.FromLSN = xtrabackup.TypeIncremental, mf.ToLSN, b.ToLSN
	return nil
}

// infoFrom: the base's end, as mariadb-backup writes it.
func (*incrementalMode) infoFrom(mf *manifest.Manifest) (uint64, string) {
	return mf.Incremental.BaseToLSN, "Y"
}
