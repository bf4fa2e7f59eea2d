package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/repo"
)

// Result is what the verification of every backup found about one of them.
type Result struct {
	ID          string
	Incremental bool
	Report      Report // its own objects (Chain holds its chain, oldest first)
	Err         error  // nil: it and its chain verified; else why it cannot be restored
}

// Summary is the verification of every backup of a repository.
type Summary struct {
	Results    []Result // the complete backups, by start time
	Unreadable []Result // the backups whose manifest could not be read, by id
	Unfinished int      // backups without a manifest (running or incomplete): not verified
}

// Failed is the backups that failed: those whose manifest could not be read, then the
// others by start time.
func (s *Summary) Failed() []Result {
	out := slices.Clone(s.Unreadable)
	for _, r := range s.Results {
		if r.Err != nil {
			out = append(out, r)
		}
	}
	return out
}

// All verifies every complete backup of the repository, each stored object once: a
// backup's own objects are read once, however many incrementals apply on it, and an
// incremental fails when a backup of its chain fails or a link of its chain is broken.
// A problem with a backup is its Result's Err; the error returned is one that stops the
// whole run (the listing failed, the context ended).
func All(ctx context.Context, cfg Config) (*Summary, error) {
	entries, err := cfg.Repo.Survey(ctx)
	if err != nil {
		return nil, err
	}
	s := &Summary{}
	var ms []*manifest.Manifest
	var total int64
	for _, e := range entries {
		if e.Err != nil {
			s.Unreadable = append(s.Unreadable, Result{ID: e.ID, Err: fmt.Errorf("backup %s failed verification: %w", e.ID, e.Err)})
			continue
		}
		if e.Manifest == nil {
			s.Unfinished++
			continue
		}
		ms = append(ms, e.Manifest)
		total += e.Manifest.TotalSize()
	}
	// Ids sort by start time to the second only.
	slices.SortStableFunc(ms, func(a, b *manifest.Manifest) int { return a.StartTime.Compare(b.StartTime) })
	cfg.Log.Info("verifying every backup", "from", cfg.Repo.Location(), "backups", len(ms), "unfinished_skipped", s.Unfinished)
	prog := progress.New(progress.Options{Label: "verify", Total: total, Terminal: cfg.Terminal, Out: cfg.Progress, Log: cfg.Log})
	defer prog.Finish()
	own := make(map[string]error, len(ms))
	h := newHeld() // the pages each delta holds, for the chains' rebuild checks
	for _, m := range ms {
		res := Result{ID: m.ID, Incremental: repo.IsIncremental(m)}
		res.Report, res.Err = verifyOwn(ctx, cfg, m, prog.Add, h)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		own[m.ID] = res.Err
		s.Results = append(s.Results, res)
	}
	for i := range s.Results {
		res := &s.Results[i]
		chain, err := repo.ChainIn(entries, res.ID)
		if res.Err == nil && err != nil {
			res.Err = err
		}
		for _, c := range chain {
			res.Report.Chain = append(res.Report.Chain, c.ID)
			if res.Err == nil && c.ID != res.ID && own[c.ID] != nil {
				res.Err = fmt.Errorf("backup %s cannot be restored: %s of its chain failed verification", res.ID, c.ID)
			}
		}
		if res.Err == nil {
			res.Err = checkRebuilt(chain, h)
		}
	}
	return s, nil
}

// verifyOwn verifies backup m's manifest, key and objects, not its chain.
func verifyOwn(ctx context.Context, cfg Config, m *manifest.Manifest, progress func(int64), h *held) (Report, error) {
	rep := Report{ID: m.ID, Files: len(m.Files), Objects: len(m.Objects), StoredBytes: m.StoredSize(), RawBytes: m.TotalSize(), Lock: m.Lock}
	if err := repo.Validate(m); err != nil {
		return rep, err
	}
	if err := cfg.Repo.CheckLock(ctx, m, time.Now()); errors.Is(err, repo.ErrLockNotHere) {
		rep.LockNotHere = true
	} else if err != nil {
		return rep, err
	}
	if err := cfg.Repo.CheckKey(ctx, m, cfg.Identities); err != nil {
		return rep, fmt.Errorf("backup %s: %w", m.ID, err)
	}
	if err := checkObjects(ctx, cfg.Repo, m); err != nil {
		return rep, err
	}
	n, err := readAll(ctx, cfg, m, progress, h)
	rep.Pages = n
	if err != nil {
		return rep, fmt.Errorf("backup %s failed verification: %w", m.ID, err)
	}
	return rep, nil
}
