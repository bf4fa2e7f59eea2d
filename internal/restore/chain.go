package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/manifest"
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

// Staging implements Source: the full backup's, removed if the restore fails: the
// deltas applied to it would not match what a resumed download checks.
func (c *ChainSource) Staging(datadir string) (string, bool, error) {
	dir, _, err := c.Links[0].Staging(datadir)
	return dir, false, err
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
	if err := applyDDLMarkers(staging); err != nil { // a stream's .del/.new, before any delta
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
	scratch := fmt.Sprintf("%s.incremental-%d", staging, i)
	if err := os.RemoveAll(scratch); err != nil {
		return nil, err
	}
	if err := os.Mkdir(scratch, 0o750); err != nil {
		return nil, fmt.Errorf("create %s: %w", scratch, err)
	}
	defer os.RemoveAll(scratch)
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
		// The pages the base copied while they changed between start and from are not
		// in this link: the chain so far is recovered first (no rollback), as
		// mariadb-backup --prepare does link by link.
		if env.RecoverBase == nil {
			return nil, fmt.Errorf("%s holds the pages changed since LSN %d, but its base %s was copied from LSN %d on: the chain needs a recovery per link (internal error: none given)", b.Origin(), from, prev.Origin(), start)
		}
		env.Log.Info("incremental: this link does not hold every page its base copied while it changed (a mariadb-backup incremental, or one taken with --incremental-lsn): recovering the chain so far first, without rolling back", "link", b.Origin(), "from_lsn", from, "base_redo_start", start)
		if err := env.RecoverBase(ctx, prev, staging); err != nil {
			return nil, err
		}
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
	case i == 0 && b.isIncremental():
		return fmt.Errorf("the first backup of a chain must be a full backup, and %s is an incremental: give its full backup first", b.Origin())
	case i == 0 && b.Prepared && b.Manifest != nil && b.Manifest.Prepared != nil:
		return fmt.Errorf("the full backup %s was prepared by ferry prepare, which rolled back its open transactions: incrementals apply only on an unprepared full backup", b.Origin())
	case i == 0:
		return nil
	case !b.isIncremental():
		return fmt.Errorf("%s is a full backup, not an incremental: a chain is one full backup followed by incrementals, oldest first", b.Origin())
	case prev != nil && b.fromLSN() != prev.toLSN():
		return fmt.Errorf("the chain is broken: %s starts at LSN %d but the backup before it, %s, ends at LSN %d: give the incrementals in the order they were taken, none missing", b.Origin(), b.fromLSN(), prev.Origin(), prev.toLSN())
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
	return b.fromLSN()
}

// isIncremental tells whether the backup is an incremental, from its manifest if it
// has one.
func (b *Backup) isIncremental() bool {
	if b.Manifest != nil {
		return b.Manifest.Type == manifest.TypeIncremental
	}
	return b.Incremental
}

// fromLSN is an incremental's from_lsn: its base's to_lsn.
func (b *Backup) fromLSN() uint64 {
	if m := b.Manifest; m != nil {
		if m.Incremental != nil {
			return m.Incremental.BaseToLSN
		}
		return 0
	}
	return b.Checkpoints.FromLSN
}

// toLSN is the backup's to_lsn, the from_lsn of an incremental on it.
func (b *Backup) toLSN() uint64 {
	if b.Manifest != nil {
		return b.Manifest.ChainLSN()
	}
	return b.Checkpoints.ToLSN
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
