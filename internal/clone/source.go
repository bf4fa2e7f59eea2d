package clone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/stream"
)

// resumeScratch is the directory, inside the staging directory, that a resumed
// clone's incremental is received into before it is applied (a "." name: applying it
// leaves it alone).
const resumeScratch = ".ferry-clone-resume"

// source is a clone as restore reads it: the donor's copy received into the staging
// directory, or, resuming (offer set), an incremental on what an interrupted clone
// left there, applied onto it.
type source struct {
	cfg       Config
	conns     connector
	first     *firstConn
	w         welcome
	staging   string
	offer     *resumeOffer
	journaled bool        // record what a later --resume may keep (not for a Galera joiner)
	feed      *apply.Feed // the log's, as it lands (nil: not followed)
}

// Name implements restore.Source.
func (s *source) Name() string { return "clone of " + s.cfg.From }

// Inspect implements restore.Source: nothing is known before the data.
func (s *source) Inspect(context.Context) (*restore.Backup, error) {
	return nil, restore.ErrNoInspect
}

// Staging implements restore.Source: the clone's staging directory, kept on failure
// when the clone journals what it received (Settle decides).
func (s *source) Staging(datadir string) (string, error) {
	if s.offer != nil {
		return s.staging, nil
	}
	return (&stream.Source{Dir: s.staging}).Staging(datadir)
}

// Fill implements restore.Source.
func (s *source) Fill(ctx context.Context, staging string, env restore.Env) (*restore.Backup, error) {
	if s.offer != nil {
		return s.fillResumed(ctx, staging, env)
	}
	var j *journal
	if s.journaled {
		j = newJournal(staging, s.w)
	}
	return s.stream(j).Fill(ctx, staging, env)
}

var (
	_ restore.Consuming = (*source)(nil)
	_ restore.Following = (*source)(nil)
)

// LogFeed implements restore.Following: the donor's ib_logfile0 as it lands in
// staging, unless the clone resumes (its log arrives in a scratch directory).
func (s *source) LogFeed(staging string) *apply.Feed {
	if s.offer != nil {
		return nil
	}
	s.feed = apply.NewFeed(filepath.Join(staging, logName))
	return s.feed
}

// Phase implements restore.Consuming: whatever phase begins after the copy
// is filled (recovery first), the copy changes from then on and is no base for a resume
// any more. The journal says so (synced) and is removed, so that nothing of it goes
// into the datadir.
func (s *source) Phase(staging, _ string) error {
	if !s.journaled {
		return nil
	}
	if _, err := os.Stat(filepath.Join(staging, journalName)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := newJournal(staging, s.w).add(journalLine{Phase: phaseFilled}); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(staging, journalName)); err != nil {
		return fmt.Errorf("remove the clone's journal: %w", err)
	}
	return nil
}

// Settle implements restore.Consuming: a failed clone keeps its staging
// directory if a resume can continue it (the error says so), else removes it.
func (s *source) Settle(staging string, err error) error {
	if st, jerr := readJournal(staging); s.journaled && jerr == nil && st != nil && st.startLSN != 0 &&
		!st.phases[phaseFilled] && !st.phases[phaseApplying] {
		return setting.Errorf("%w; the partial clone is kept in %s: run the same command with %s to continue it", err, staging, setting.Resume)
	}
	if rerr := os.RemoveAll(staging); rerr != nil {
		return fmt.Errorf("%w; the staging directory %s could not be removed (%v): remove it", err, staging, rerr)
	}
	return err
}

// Finished implements restore.Consuming.
func (s *source) Finished(_, _ string) error { return nil }

// stream is the donor's copy as a stream restore reads it.
func (s *source) stream(j *journal) *stream.Source {
	st := start{Resume: s.offer}
	return &stream.Source{Label: s.Name(),
		Unpack: func(ctx context.Context, dir string, _ restore.Env) (*stream.Unpacked, error) {
			feed := s.feed
			if feed != nil && feed.Path() != filepath.Join(dir, logName) {
				feed = nil // not the directory it follows
			}
			return receive(ctx, s.cfg, s.conns, s.first.take(), s.w, st, j, feed, dir)
		}}
}

// fillResumed receives the donor's incremental on the interrupted clone into a
// scratch directory, checks it is the one asked for, removes what the interrupted
// clone did not receive whole and applies the incremental onto the rest, as a chain
// restore applies a link; one recovery with its redo then makes the copy consistent.
func (s *source) fillResumed(ctx context.Context, staging string, env restore.Env) (*restore.Backup, error) {
	scratch := filepath.Join(staging, resumeScratch)
	if err := os.RemoveAll(scratch); err != nil {
		return nil, fmt.Errorf("clear %s: %w", scratch, err)
	}
	if err := os.Mkdir(scratch, 0o750); err != nil {
		return nil, fmt.Errorf("create %s: %w", scratch, err)
	}
	b, err := s.stream(nil).Fill(ctx, scratch, env)
	if err != nil {
		return nil, err
	}
	if m := b.Manifest; m == nil || m.Type != manifest.TypeIncremental || m.Incremental == nil || m.Incremental.FromLSN != s.offer.StartLSN {
		return nil, fmt.Errorf("%w: the donor did not send an incremental from LSN %d for the resumed clone", errProtocol, s.offer.StartLSN)
	}
	if err := removeUnoffered(staging, s.offer); err != nil {
		return nil, err
	}
	j := newJournal(staging, s.w)
	if err := j.add(journalLine{Phase: phaseApplying}); err != nil {
		return nil, err
	}
	st, err := delta.ApplyDir(staging, scratch, env.Log)
	if err != nil {
		return nil, fmt.Errorf("apply the resumed clone's changed pages: %w", err)
	}
	if err := os.RemoveAll(scratch); err != nil {
		return nil, fmt.Errorf("remove %s: %w", scratch, err)
	}
	env.Log.Info("resumed clone applied", "files_kept", len(s.offer.Files), "deltas", st.Deltas, "pages", st.Pages,
		"created", st.Created, "removed", st.Removed)
	if b, err = restore.Open(staging); err != nil {
		return nil, err
	}
	b.Source, b.Chain = s.Name(), 2
	return b, nil
}

// removeUnoffered removes from staging every file the resume offer does not keep:
// those the interrupted clone received in part, and its other files (the donor sends
// them again whole). Names starting with "." at the top are ferry's own.
func removeUnoffered(staging string, o *resumeOffer) error {
	keep := map[string]bool{}
	for _, f := range o.Files {
		keep[f.Path] = true
	}
	return filepath.WalkDir(staging, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(staging, p)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
			return nil
		case !strings.Contains(rel, "/") && strings.HasPrefix(rel, "."):
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir() || keep[rel]:
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s of the interrupted clone: %w", rel, err)
		}
		return nil
	})
}

// pickResume reads what an interrupted clone left in staging and decides whether the
// clone resumes from it (the offer to make the donor) or starts over, saying which in
// one line; starting over clears the staging directory.
func pickResume(log *slog.Logger, staging string, w welcome) (*resumeOffer, error) {
	if _, err := os.Stat(staging); errors.Is(err, fs.ErrNotExist) {
		log.Info("resume: no interrupted clone to resume; cloning whole", "staging", staging)
		return nil, nil
	}
	st, err := readJournal(staging)
	var o *resumeOffer
	why := ""
	if err != nil {
		why = err.Error()
	} else {
		o, why = decideResume(st, w, staging)
	}
	if b, err := json.Marshal(o); o != nil && (err != nil || len(b) > maxPayload/2) {
		o, why = nil, fmt.Sprintf("the interrupted clone received too many files whole to list them to the donor (%d)", len(o.Files))
	}
	if o != nil {
		log.Info("resume: keeping the tablespaces the interrupted clone received whole; the donor sends their pages changed since its copy began, and every other file whole",
			"files_kept", len(o.Files), "kept_mib", o.bytes()>>20, "from_lsn", o.StartLSN, "staging", staging)
		return o, nil
	}
	log.Warn("resume: the interrupted clone cannot be resumed; removing it and starting over", "why", why, "staging", staging)
	if err := os.RemoveAll(staging); err != nil {
		return nil, fmt.Errorf("remove the staging directory of an interrupted clone %s: %w", staging, err)
	}
	return nil, nil
}
