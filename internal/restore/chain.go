package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/redo"
)

// ChainSource is a full backup and the incrementals taken on it, oldest first,
// restored as one backup (docs/incremental.md). The full backup fills the staging
// directory; each incremental is filled into a scratch directory inside it, checked
// against the link before it, and its deltas are written into the staging copy; then
// a single recovery with the newest incremental's redo makes the whole copy consistent.
// Each link is any Source: directories, streams, repository backups.
type ChainSource struct {
	Links []Source
}

// Name implements Source.
func (c *ChainSource) Name() string {
	return fmt.Sprintf("%s (a chain of %d backups)", c.Links[len(c.Links)-1].Name(), len(c.Links))
}

// Inspect implements Source: it checks the chain as far as the links tell before any
// data moves, and returns the newest link (nil if a link is a stream).
func (c *ChainSource) Inspect(ctx context.Context) (*Backup, error) {
	if len(c.Links) < 2 {
		return nil, errors.New("internal error: a chain needs a full backup and at least one incremental")
	}
	var prev, b *Backup
	for i, l := range c.Links {
		var err error
		if b, err = l.Inspect(ctx); err != nil {
			return nil, err
		}
		if b == nil {
			return nil, nil // a stream: checked as it is read
		}
		if err := checkLink(i, prev, b); err != nil {
			return nil, err
		}
		prev = b
	}
	b.Chain = len(c.Links)
	return b, nil
}

// Staging implements Source: the full backup's.
func (c *ChainSource) Staging(datadir string) (string, bool, error) {
	return c.Links[0].Staging(datadir)
}

// Fill implements Source: the full backup, then each incremental applied in order.
func (c *ChainSource) Fill(ctx context.Context, staging string, env Env) (*Backup, error) {
	prev, err := c.Links[0].Fill(ctx, staging, env)
	if err != nil {
		return nil, err
	}
	if err := checkLink(0, nil, prev); err != nil {
		return nil, err
	}
	for i, l := range c.Links[1:] {
		if prev, err = c.applyLink(ctx, i+1, l, prev, staging, env); err != nil {
			return nil, err
		}
	}
	prev.Chain = len(c.Links)
	return prev, nil
}

// applyLink fills incremental number i into a scratch directory, checks it follows
// prev and applies it onto staging. A link that does not hold every page its base
// copied while it changed (a mariadb-backup incremental) needs the base recovered first;
// ferry refuses such a chain rather than restore it inconsistent.
func (c *ChainSource) applyLink(ctx context.Context, i int, l Source, prev *Backup, staging string, env Env) (*Backup, error) {
	scratch := filepath.Join(staging, fmt.Sprintf(".ferry-incremental-%d", i))
	if err := os.RemoveAll(scratch); err != nil {
		return nil, err
	}
	if err := os.Mkdir(scratch, 0o750); err != nil {
		return nil, fmt.Errorf("create %s: %w", scratch, err)
	}
	b, err := l.Fill(ctx, scratch, env)
	if err != nil {
		return nil, err
	}
	if err := checkLink(i, prev, b); err != nil {
		return nil, err
	}
	start, err := redoStart(prev, staging)
	if err != nil {
		return nil, err
	}
	if from := b.selectedFrom(); from > start {
		return nil, fmt.Errorf("%s holds the pages changed since LSN %d, but its base %s was copied from LSN %d on: the pages the base copied while they changed between the two are not in it, so the chain needs a recovery per link (mariadb-backup --prepare --incremental-dir does that); ferry restores chains of incrementals taken by ferry", b.Origin(), from, prev.Origin(), start)
	}
	st, err := delta.ApplyDir(staging, scratch, env.Log)
	if err != nil {
		return nil, fmt.Errorf("apply incremental %s: %w", b.Origin(), err)
	}
	env.Log.Info("incremental applied", "backup", b.Origin(), "deltas", st.Deltas, "pages", st.Pages, "created", st.Created, "renamed", st.Renamed, "removed", st.Removed)
	if err := os.RemoveAll(scratch); err != nil {
		return nil, err
	}
	if b.Dir == scratch {
		b.Dir = staging // its metadata files are now in staging
	}
	return b, nil
}

// checkLink refuses a chain whose link i does not follow prev: the first must be a
// full backup not prepared by ferry (its rolled-back transactions would not match the
// deltas), every other an incremental whose from_lsn is its base's to_lsn.
func checkLink(i int, prev, b *Backup) error {
	switch {
	case i == 0 && b.Incremental:
		return fmt.Errorf("the first backup of a chain must be a full backup, and %s is an incremental: give its full backup first", b.Origin())
	case i == 0 && b.Prepared && b.Manifest != nil && b.Manifest.Prepared != nil:
		return fmt.Errorf("the full backup %s was prepared by ferry prepare, which rolled back its open transactions: incrementals apply only on an unprepared full backup", b.Origin())
	case i == 0:
		return nil
	case !b.Incremental:
		return fmt.Errorf("%s is a full backup, not an incremental: a chain is one full backup followed by incrementals, oldest first", b.Origin())
	case prev != nil && b.Checkpoints.FromLSN != prev.Checkpoints.ToLSN:
		return fmt.Errorf("the chain is broken: %s starts at LSN %d but the backup before it, %s, ends at LSN %d: give the incrementals in the order they were taken, none missing", b.Origin(), b.Checkpoints.FromLSN, prev.Origin(), prev.Checkpoints.ToLSN)
	case prev != nil && b.Manifest != nil && prev.Manifest != nil && b.Manifest.Incremental != nil &&
		b.Manifest.Incremental.BaseID != "" && b.Manifest.Incremental.BaseID != prev.Manifest.ID:
		return fmt.Errorf("the chain is broken: %s was taken on backup %s, not on %s (%s)", b.Origin(), b.Manifest.Incremental.BaseID, prev.Manifest.ID, prev.Origin())
	}
	return nil
}

// selectedFrom is the LSN above which an incremental holds every page: ferry records
// it; mariadb-backup copies the pages above its from_lsn.
func (b *Backup) selectedFrom() uint64 {
	if b.Manifest != nil && b.Manifest.Incremental != nil {
		return b.Manifest.Incremental.FromLSN
	}
	return b.Checkpoints.FromLSN
}

// redoStart is the LSN the redo of the chain so far starts from, read from the
// staging copy's ib_logfile0 (the previous link's): the copy's pages are exact below it.
// A base prepared by mariadb-backup is exact up to its end.
func redoStart(prev *Backup, staging string) (uint64, error) {
	if prev.Prepared {
		return prev.Checkpoints.LastLSN, nil
	}
	if prev.Manifest != nil && prev.Manifest.StartLSN != 0 {
		return prev.Manifest.StartLSN, nil
	}
	cp, err := redo.NewestCheckpoint(filepath.Join(staging, "ib_logfile0"))
	if err != nil {
		return 0, fmt.Errorf("read the checkpoint of %s's redo log: %w", prev.Origin(), err)
	}
	return cp.LSN, nil
}
