package pitr

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/restore"
)

// Prepared is a point-in-time restore planned for a datadir: the backup to restore,
// and the relay logs that take it to the target, written beside the datadir.
type Prepared struct {
	Backup   *manifest.Manifest
	Plan     *binlog.Plan
	RelayDir string
}

// Remove deletes the relay logs (the replay moves them into its staging directory
// before it starts, so after a restore there is usually nothing left).
func (p *Prepared) Remove() { os.RemoveAll(p.RelayDir) }

// Prepare plans a point-in-time restore into datadir (Plan: backup id, or the newest
// that fits if id is ""). The relay logs go to a directory with one name per datadir,
// on its filesystem as its staging is: what a killed restore left there is replaced.
func Prepare(ctx context.Context, r *repo.Repo, a *binlog.Archive, id string, t binlog.Target, datadir string) (*Prepared, error) {
	datadir, err := filepath.Abs(datadir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(datadir), 0o755); err != nil {
		return nil, err
	}
	p := &Prepared{RelayDir: restore.StagingPath(datadir, "relay")}
	if err := os.RemoveAll(p.RelayDir); err != nil {
		return nil, fmt.Errorf("relay log directory: %w", err)
	}
	if p.Backup, p.Plan, err = Plan(ctx, r, a, id, t, p.RelayDir); err != nil {
		p.Remove()
		return nil, err
	}
	return p, nil
}
