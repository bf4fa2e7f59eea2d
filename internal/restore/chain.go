package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/redo"
)

// ChainSource is a full backup and the incrementals taken on it, oldest first,
// restored as one backup (docs/incremental.md). The full backup fills the staging
// directory; each incremental is filled into a scratch directory inside it, checked
// against the link before it, and its deltas are written into the staging copy; then
// a single recovery with the newest incremental's redo makes the whole copy consistent.
// Each link is any Source: directories, streams, repository backups.
//
// A chain whose full backup keeps its staging directory on failure (a repository
// backup) is resumed: the links' scratch directories are kept with it, and the journal
// records each link applied, so that a resumed run neither downloads nor applies again
// what an earlier run did (see resumeAt).
type ChainSource struct {
	Links     []Source
	inspected []*Backup // the links as Inspect found them (none if a link is a stream)
	resumable bool      // the staging directory is kept on failure
}

// Caps implements Source: a chain tells its backups before any data moves when every
// link does (none is a stream), and then keeps its staging directory on failure if its
// full backup does (a repository backup: the journal records how far the chain got).
func (c *ChainSource) Caps() Caps {
	inspect := len(c.Links) > 0
	for _, l := range c.Links {
		inspect = inspect && l.Caps().Inspect
	}
	var first Caps
	if len(c.Links) > 0 {
		first = c.Links[0].Caps()
	}
	return Caps{Inspect: inspect, Resume: inspect && first.Resume, Moves: first.Moves}
}

// scratchPrefix starts the name of the directory, inside the staging directory, into
// which a link that cannot be read where it is (a stream, a repository backup) is
// filled. The "." keeps it out of the deltas' reach (delta.ApplyDir leaves such names
// alone); it is kept with the staging directory for --resume and removed once every
// link is applied.
const scratchPrefix = ".ferry-incremental-"

// scratchDir is the scratch directory of link index inside staging.
func scratchDir(staging string, index int) string {
	return filepath.Join(staging, fmt.Sprintf("%s%d", scratchPrefix, index))
}

var (
	_ Source  = (*ChainSource)(nil)
	_ Resumer = (*ChainSource)(nil)
)

// Name implements Source.
func (c *ChainSource) Name() string {
	return fmt.Sprintf("%s (a chain of %d backups)", c.Links[len(c.Links)-1].Name(), len(c.Links))
}

// Inspect implements Source: it checks the chain before any data moves and returns
// the newest link. A chain with a stream among its links is checked as it is read.
func (c *ChainSource) Inspect(ctx context.Context) (*Backup, error) {
	if len(c.Links) < 2 {
		return nil, errors.New("internal error: a chain needs a full backup and at least one incremental")
	}
	if !c.Caps().Inspect {
		return nil, ErrNoInspect
	}
	c.inspected = nil
	var prev, b *Backup
	for i, l := range c.Links {
		var err error
		if b, err = l.Inspect(ctx); err != nil {
			return nil, err
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

// Staging implements Source: the full backup's, kept on failure if the full backup's
// is (a repository backup: the journal in it records how far the chain got).
func (c *ChainSource) Staging(datadir string) (string, error) {
	c.resumable = c.Caps().Resume && len(c.inspected) == len(c.Links)
	return c.Links[0].Staging(datadir)
}

// Fill implements Source: the full backup, then every incremental made readable and
// checked against the one before, then each applied in order. A resumed chain starts
// after the last link an earlier run applied.
func (c *ChainSource) Fill(ctx context.Context, staging string, env Env) (*Backup, error) {
	// A chain is restored whole: a link's delta of a tablespace the base left out
	// would be applied onto nothing and make a file of only the changed pages.
	env.Want = nil
	applied, err := c.resumeAt(staging, env)
	if err != nil {
		return nil, err
	}
	base, links, err := c.fill(ctx, staging, env, applied)
	if err != nil {
		return nil, err
	}
	prev := base
	for i, l := range links {
		if i < applied {
			prev = l.b
			continue
		}
		if (i == applied || l.recoverFirst) && l.segment == nil {
			l.segment = laterPages(links[i:], env)
		}
		l.othersFromNext = i+1 < len(links) && !links[i+1].recoverFirst
		if err := c.applyRecorded(ctx, l, prev, staging, env); err != nil {
			return nil, err
		}
		if i+1 < len(links) && !links[i+1].recoverFirst {
			links[i+1].segment = l.segment
		}
		prev = l.b
	}
	if err := removeScratch(staging); err != nil {
		return nil, err
	}
	if applied == len(links) {
		// Every link was applied by an earlier run: the copy holds the newest's
		// metadata.
		if prev, err = Open(staging); err != nil {
			return nil, err
		}
		prev.Source = c.Links[len(c.Links)-1].Name()
	}
	prev.Chain = len(c.Links)
	return prev, nil
}

// fill fills staging with the full backup (unless an earlier run did: applied links)
// and makes every incremental readable, checked against the link before it.
func (c *ChainSource) fill(ctx context.Context, staging string, env Env, applied int) (*Backup, []*link, error) {
	if applied > 0 {
		env.Log.Info("resume: the chain's full backup and its first incrementals are already applied in the copy: nothing of them is downloaded or applied again",
			"applied", applied, "of", len(c.Links)-1, "staging", staging)
		links, err := c.fillLinks(ctx, c.inspected[0], staging, env, applied)
		return c.inspected[0], links, err
	}
	if links := c.planAhead(); links != nil {
		base, err := c.fillAhead(ctx, staging, env, links)
		return base, links, err
	}
	base, err := c.fillBase(ctx, staging, env)
	if err != nil {
		return nil, nil, err
	}
	links, err := c.fillLinks(ctx, base, staging, env, 0)
	return base, links, err
}

// planAhead names the incrementals before anything is copied, when every backup of
// the chain is a directory read where it is (nil otherwise): their pages are then
// known before the full backup is copied.
func (c *ChainSource) planAhead() []*link {
	if len(c.inspected) != len(c.Links) {
		return nil // a stream
	}
	for _, src := range c.Links {
		if !src.Caps().Local {
			return nil
		}
	}
	var links []*link
	prev := c.inspected[0]
	for i, b := range c.inspected[1:] {
		start, err := redoStart(prev, prev.Dir)
		if err != nil {
			return nil // told again, as an error, by fillLinks
		}
		links = append(links, &link{b: b, index: i + 1, dir: b.Dir, recoverFirst: b.selectedFrom() > start})
		prev = b
	}
	return links
}

// fillAhead checks the incrementals against their manifests where they are, then
// copies the full backup into staging, leaving unwritten every page (but page 0) that
// an incremental of the first segment writes: each such page is written once, by the
// last link that holds it, instead of once by the copy and again by the links. A
// first link that needs its base recovered first leaves nothing out. (Checking the
// links during the copy was slower: both read the same disk.)
func (c *ChainSource) fillAhead(ctx context.Context, staging string, env Env, links []*link) (*Backup, error) {
	baseEnv := env
	if !links[0].recoverFirst {
		links[0].segment = laterPages(links, env)
		baseEnv.Leave = links[0].segment.leave()
	}
	env.Log.Info("incremental: checking the incrementals, then copying the full backup without the pages they replace",
		"incrementals", len(links), "pages_left_to_them", links[0].segment.size())
	for i, l := range links {
		// A link that the next follows without a recovery is read for its deltas and
		// markers only (othersFromNext): its other files, its redo log among them, are
		// never restored, so they are not read to be checked either.
		var only func(string) bool
		if i+1 < len(links) && !links[i+1].recoverFirst {
			only = func(rel string) bool { return !delta.Other(rel) }
		}
		if _, err := c.Links[l.index].(LocalSource).Verify(ctx, env, only); err != nil {
			return nil, err
		}
	}
	return c.fillBase(ctx, staging, baseEnv)
}

// fillBase fills staging with the full backup.
func (c *ChainSource) fillBase(ctx context.Context, staging string, env Env) (*Backup, error) {
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
	return base, nil
}

// resumeAt reads how many links (after the full backup) an earlier run applied into
// staging, as its journal records. A link whose apply was cut short, or a journal of
// another chain on the same full backup, makes the restore start over from what still
// verifies against the full backup's objects (the links' scratch directories are kept:
// they are not downloaded again), as the log says.
func (c *ChainSource) resumeAt(staging string, env Env) (int, error) {
	if !c.resumable {
		return 0, nil
	}
	phases, err := startOverAfterReplay(staging, env.Log)
	if err != nil {
		return 0, err
	}
	applied, applying := 0, ""
	for _, p := range phases {
		if id, ok := strings.CutPrefix(p, phaseApplying); ok {
			applying = id
			continue
		}
		id, ok := strings.CutPrefix(p, phaseApplied)
		if !ok {
			continue
		}
		if applied+1 >= len(c.inspected) || id != linkID(c.inspected[applied+1]) || id != applying {
			env.Log.Warn("resume: the copy holds incrementals of another chain: it is checked against the full backup again (what they changed is downloaded again)", "staging", staging)
			return 0, resetPhases(staging)
		}
		applied++
		applying = ""
	}
	if applying != "" {
		env.Log.Warn("resume: an incremental was being applied when the restore stopped, and applying it is not resumed halfway: the copy is checked against the full backup again (what the deltas changed is downloaded again) and the incrementals applied again from their kept copies",
			"incremental", applying, "staging", staging)
		return 0, resetPhases(staging)
	}
	return applied, nil
}

// applyRecorded applies a link and records it in the journal (when resumable): before
// ("applying"), so that a run cut short in the middle is seen, and after ("applied").
func (c *ChainSource) applyRecorded(ctx context.Context, l *link, prev *Backup, staging string, env Env) error {
	if c.resumable {
		if err := addPhase(staging, phaseApplying+linkID(l.b)); err != nil {
			return err
		}
	}
	faultpoint.At(ctx, "chain-apply", l.index)
	if err := c.applyLink(ctx, l, prev, staging, env); err != nil {
		return err
	}
	if c.resumable {
		return addPhase(staging, phaseApplied+linkID(l.b))
	}
	return nil
}

// linkID names a link in the journal: its backup id.
func linkID(b *Backup) string {
	if b.Manifest != nil {
		return b.Manifest.ID
	}
	return b.Origin()
}

// removeScratch removes the links' scratch directories from staging.
func removeScratch(staging string) error {
	dirs, err := filepath.Glob(filepath.Join(staging, scratchPrefix+"*"))
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("remove the incremental's scratch directory: %w", err)
		}
	}
	return nil
}

// link is an incremental of the chain, readable in dir.
type link struct {
	b            *Backup
	index        int    // in the chain, from 1
	dir, scratch string // where its files are; its scratch directory ("" if none)
	// recoverFirst: the link does not hold every page its base copied while it
	// changed (a mariadb-backup incremental, or one taken with --incremental-lsn): the
	// chain so far is recovered before it is applied, as mariadb-backup --prepare does
	// link by link.
	recoverFirst bool
	segment      *segment // the links applied between two recoveries, this one among them
	// othersFromNext: the next link is applied right after this one and brings the
	// files that are not tablespaces (the redo log among them): this one's are not
	// copied.
	othersFromNext bool
}

// fillLinks makes every incremental readable (in place, or filled into a scratch
// directory inside staging) and checks each against the link before it. The first
// applied links, already in the copy, are only named (their backup as inspected).
func (c *ChainSource) fillLinks(ctx context.Context, base *Backup, staging string, env Env, applied int) ([]*link, error) {
	var links []*link
	prev, prevDir := base, staging
	for i, src := range c.Links[1:] {
		l := &link{index: i + 1, scratch: scratchDir(staging, i+1)}
		if i < applied {
			l.b, l.dir = c.inspected[i+1], staging
			links = append(links, l)
			prev, prevDir = l.b, staging
			continue
		}
		keep := c.resumable && checkJournal(l.scratch, linkID(c.inspected[i+1])) == nil
		var err error
		if l.b, l.dir, err = fillLink(ctx, src, l.scratch, keep, env); err != nil {
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
		env.Log.Info("incremental: this link does not hold every page its base copied while it changed (a mariadb-backup incremental, or one taken from a given LSN): recovering the chain so far first, without rolling back",
			"link", l.b.Origin(), "from_lsn", l.b.selectedFrom())
		if err := env.RecoverBase(ctx, prev, staging); err != nil {
			return err
		}
	}
	// Not synced link by link: the journal's addPhase and finishStaging sync the
	// whole staging directory.
	st, err := delta.ApplyDirWith(staging, l.dir, env.Log, delta.Options{Skip: l.segment.skip(l.index), NoSync: true, OthersFromNext: l.othersFromNext})
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

// size is how many pages the segment remembers.
func (s *segment) size() int {
	if s == nil {
		return 0
	}
	return len(s.last)
}

// leave is the Leave of the full backup's copy before the segment: every page but
// page 0 that a link of the segment writes (nil if the segment remembers none).
func (s *segment) leave() filecopy.Leave {
	if s == nil || s.last == nil {
		return nil
	}
	return func(head []byte) (int, func(uint32) bool) {
		h, err := innodb.ParseSpaceHeader(head)
		if err != nil || h.SpaceID == 0 {
			return 0, nil
		}
		return h.Flags.PhysicalSize(), func(p uint32) bool {
			_, ok := s.last[delta.PageKey{Space: h.SpaceID, Page: p}]
			return ok && p != 0
		}
	}
}

// skip tells link index which pages a later link of the segment writes. Page 0 is
// always written: applying a link finds each tablespace's file by the space id in it.
func (s *segment) skip(index int) delta.Skip {
	if s == nil || s.last == nil {
		return nil
	}
	return func(k delta.PageKey) bool { return k.Page != 0 && s.last[k] > index }
}

// LocalSource is a Source whose Caps().Local is set: its files can be read where they
// are (a backup directory), so that a chain verifies such a link in place and applies
// it from there, and its pages are written once, into the staging copy.
type LocalSource interface {
	// Verify checks every file (those only names, if set) against the backup's
	// checksums and returns the backup, whose Dir holds its files.
	Verify(ctx context.Context, env Env, only func(path string) bool) (*Backup, error)
}

// fillLink makes a link's files readable in a directory: where they are, or filled
// into scratch (a stream, a repository backup), continuing what scratch holds if keep
// is set. It returns that directory.
func fillLink(ctx context.Context, l Source, scratch string, keep bool, env Env) (*Backup, string, error) {
	if l.Caps().Local {
		b, err := l.(LocalSource).Verify(ctx, env, nil)
		if err != nil {
			return nil, "", err
		}
		return b, b.Dir, nil
	}
	if !keep {
		if err := os.RemoveAll(scratch); err != nil {
			return nil, "", err
		}
		if err := os.Mkdir(scratch, 0o750); err != nil {
			return nil, "", fmt.Errorf("create %s: %w", scratch, err)
		}
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
