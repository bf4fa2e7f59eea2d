package pitr

import (
	"context"
	"log/slog"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// ExpireOptions say how ExpireBinlogs carries its prune out.
type ExpireOptions struct {
	DryRun bool // delete nothing
	// Pruning, if set, is told of a prune that lets files go before it is applied
	// (or, in a dry run, instead).
	Pruning func(*Prune)
	Log     *slog.Logger // logs what was deleted; nil: nothing
}

// ExpireBinlogs deletes the archived binlog files and gap records that none of the
// kept backups needs to reach the present (PlanPrune, then Apply) and returns the
// archive's summary after it (in a dry run, as it would be), or nil if the archive
// holds no file.
func ExpireBinlogs(ctx context.Context, a *binlog.Archive, kept []*manifest.Manifest, o ExpireOptions) (*binlog.Summary, error) {
	pr, err := PlanPrune(ctx, a, kept)
	if err != nil {
		return nil, err
	}
	if len(pr.Files) > 0 && o.Pruning != nil {
		o.Pruning(pr)
	}
	if !o.DryRun {
		if err := pr.Apply(ctx, a); err != nil {
			return nil, err
		}
		if o.Log != nil {
			o.Log.Info("expired binlogs", "files", len(pr.Files), "stored_bytes", pr.Bytes)
		}
	}
	s, err := a.Summarize(ctx)
	if err != nil || s.Files == 0 {
		return nil, err
	}
	if o.DryRun {
		s = pr.After(s)
	}
	return s, nil
}
