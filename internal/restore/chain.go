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
	Links     []Source
	inspected []*Backup // what Inspect read of each link
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
	c.inspected = nil
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
		c.inspected = append(c.inspected, b)
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

// Fill implements Source: the full backup, then every incremental made readable and
// checked against the one before, then each applied in order.
func (c *ChainSource) Fill(ctx context.Context, staging string, env Env) (*Backup, error) {
	// A chain is restored whole: a link's delta of a tablespace the base left out
	// would be applied onto nothing and make a file of only the changed pages.
	env.Want = nil
	base, err := c.Links[0].Fill(ctx, staging, env)
	if err != nil {
		return nil, err
	}
	if err := checkLink(0, nil, base); err != nil {
		return nil, err
	}
	if err := applyDDLMarkers(staging); err != nil { // a stream's .del/.new, before any delta
		return nil, err
	}
	links, err := c.fillLinks(ctx, base, staging, env)
	defer func() {
		for _, l := range links {
			os.RemoveAll(l.scratch)
		}
	}()
	if err != nil {
		return nil, err
	}
	prev := base
	for i, l := range links {
		if i == 0 || l.recoverFirst {
			l.segment = laterPages(links[i:], env)
		}
		if err := c.applyLink(ctx, l, prev, staging, env); err != nil {
			return nil, err
		}
		if i+1 < len(links) && !links[i+1].recoverFirst {
			links[i+1].segment = l.segment
		}
		prev = l.b
	}
	prev.Chain = len(c.Links)
	return prev, nil
}

// link is an incremental of the chain, readable in dir.
type link struct {
	b            *Backup
	index        int    // in the chain, from 1
	dir, scratch string // where its files are; the scratch directory to remove ("" if none)
	// recoverFirst: the link does not hold every page its base copied while it
	// changed (a mariadb-backup incremental, or one taken with --incremental-lsn): the
	// chain so far is recovered before it is applied, as mariadb-backup --prepare does
	// link by link.
	recoverFirst bool
	segment      *segment // the links applied between two recoveries, this one among them
}

// fillLinks makes every incremental readable (in place, or filled into a scratch
// directory beside staging) and checks each against the link before it.
func (c *ChainSource) fillLinks(ctx context.Context, base *Backup, staging string, env Env) ([]*link, error) {
	var links []*link
	prev, prevDir := base, staging
	for i, src := range c.Links[1:] {
		l := &link{index: i + 1, scratch: fmt.Sprintf("%s.incremental-%d", staging, i+1)}
		var err error
		if l.b, l.dir, err = fillLink(ctx, src, l.scratch, env); err != nil {
			return links, err
		}
		if l.dir != l.scratch {
			l.scratch = ""
		}
		links = append(links, l)
		if err := checkLink(i+1, prev, l.b); err != nil {
			return links, err
		}
		start, err := redoStart(prev, prevDir)
		if err != nil {
			return links, err
		}
		l.recoverFirst = l.b.selectedFrom() > start
		prev, prevDir = l.b, l.dir
	}
	return links, nil
}

// applyLink applies one incremental onto staging, after recovering the chain so far
// if the link needs it.
func (c *ChainSource) applyLink(ctx context.Context, l *link, prev *Backup, staging string, env Env) error {
	if l.recoverFirst {
		if env.RecoverBase == nil {
			return fmt.Errorf("%s needs its base recovered first (internal error: no recovery given)", l.b.Origin())
		}
		env.Log.Info("incremental: this link does not hold every page its base copied while it changed (a mariadb-backup incremental, or one taken with --incremental-lsn): recovering the chain so far first, without rolling back",
			"link", l.b.Origin(), "from_lsn", l.b.selectedFrom())
		if err := env.RecoverBase(ctx, prev, staging); err != nil {
			return err
		}
	}
	st, err := delta.ApplyDirSkip(staging, l.dir, env.Log, l.segment.skip(l.index))
	if err != nil {
		return fmt.Errorf("apply incremental %s: %w", l.b.Origin(), err)
	}
	env.Log.Info("incremental applied", "backup", l.b.Origin(), "deltas", st.Deltas, "pages", st.Pages,
		"pages_left_to_a_later_link", st.Skipped, "created", st.Created, "renamed", st.Renamed, "removed", st.Removed)
	if l.dir == l.scratch {
		l.b.Dir = staging // its metadata files are now in staging
	}
	return nil
}

// maxSkipPages bounds the pages a segment remembers (about 64 bytes each): past it,
// every page is written.
const maxSkipPages = 8 << 20

// segment remembers, for the links applied between two recoveries, which link writes
// each page last: an earlier link does not write a page a later one overwrites before
// anything reads it, so that each page is written once.
type segment struct {
	last map[delta.PageKey]int // nil: write every page
}

// laterPages reads the delta headers of the links from links[0] up to the next that
// needs a recovery first.
func laterPages(links []*link, env Env) *segment {
	s := &segment{last: map[delta.PageKey]int{}}
	for i, l := range links {
		if i > 0 && l.recoverFirst {
			break
		}
		err := delta.ListPages(l.dir, func(k delta.PageKey) {
			if s.last != nil {
				s.last[k] = l.index
				if len(s.last) > maxSkipPages {
					s.last = nil
				}
			}
		})
		if err != nil || s.last == nil {
			env.Log.Debug("incremental: every page of the chain is written", "why", err)
			return &segment{}
		}
	}
	return s
}

// skip tells link index which pages a later link of the segment writes. Page 0 is
// always written: applying a link finds each tablespace's file by the space id in it.
func (s *segment) skip(index int) delta.Skip {
	if s == nil || s.last == nil {
		return nil
	}
	return func(k delta.PageKey) bool { return k.Page != 0 && s.last[k] > index }
}

// localSource is a Source whose files can be read where they are (a backup
// directory): a chain verifies such a link in place and applies it from there, so its
// pages are written once, into the staging copy.
type localSource interface {
	// Verify checks every file against the backup's checksums and returns the
	// backup, whose Dir holds its files.
	Verify(ctx context.Context, env Env) (*Backup, error)
}

// fillLink makes a link's files readable in a directory: where they are, or filled
// into scratch (a stream, a repository backup). It returns that directory.
func fillLink(ctx context.Context, l Source, scratch string, env Env) (*Backup, string, error) {
	if ls, ok := l.(localSource); ok {
		b, err := ls.Verify(ctx, env)
		if err != nil {
			return nil, "", err
		}
		return b, b.Dir, nil
	}
	if err := os.RemoveAll(scratch); err != nil {
		return nil, "", err
	}
	if err := os.Mkdir(scratch, 0o750); err != nil {
		return nil, "", fmt.Errorf("create %s: %w", scratch, err)
	}
	b, err := l.Fill(ctx, scratch, env)
	return b, scratch, err
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

// redoStart is the LSN the redo of the backup prev starts from (its manifest, or the
// checkpoint of the ib_logfile0 in dir, where its files are): its pages are exact
// below it. A base prepared by mariadb-backup is exact up to its end.
func redoStart(prev *Backup, dir string) (uint64, error) {
	if prev.Prepared {
		return prev.Checkpoints.LastLSN, nil
	}
	if prev.Manifest != nil && prev.Manifest.StartLSN != 0 {
		return prev.Manifest.StartLSN, nil
	}
	cp, err := redo.NewestCheckpoint(filepath.Join(dir, "ib_logfile0"))
	if err != nil {
		return 0, fmt.Errorf("read the checkpoint of %s's redo log: %w", prev.Origin(), err)
	}
	return cp.LSN, nil
}
