package repo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferry-backup/ferry/internal/storage"
	"golang.org/x/sync/errgroup"
)

// Policy says which complete backups expire keeps; a backup kept by either rule stays.
type Policy struct {
	KeepLast   int           // the newest KeepLast complete backups
	KeepWithin time.Duration // complete backups that ended less than this long ago
}

// Check refuses a policy that names no rule.
func (p Policy) Check() error {
	if p.KeepLast <= 0 && p.KeepWithin <= 0 {
		return errors.New("say what to keep: --keep-last N and/or --keep-days D (expire never guesses)")
	}
	return nil
}

// ExpirePlan is what expire would do.
type ExpirePlan struct {
	Keep    []Entry // complete backups kept, and backups still running
	Expired []Entry // complete backups the policy lets go
	Debris  []Entry // backups interrupted before their manifest
}

// PlanExpire applies p to the repository's backups at time now. The newest complete
// backup is always kept, and so is a backup still being written.
func (r *Repo) PlanExpire(ctx context.Context, p Policy, now time.Time) (*ExpirePlan, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	plan := &ExpirePlan{}
	kept := 0
	for i := len(list) - 1; i >= 0; i-- { // newest first
		e := list[i]
		switch {
		case e.Status == StatusRunning:
			plan.Keep = append(plan.Keep, e)
		case e.Status == StatusIncomplete:
			plan.Debris = append(plan.Debris, e)
		case kept == 0 || kept < p.KeepLast || p.KeepWithin > 0 && now.Sub(e.Manifest.EndTime) < p.KeepWithin:
			kept++
			plan.Keep = append(plan.Keep, e)
		default:
			plan.Expired = append(plan.Expired, e)
		}
	}
	return plan, nil
}

// Delete removes a backup: its manifest first, so that it stops being restorable at
// once and an interrupted delete leaves debris a later expire removes, then every
// other object under its prefix.
func (r *Repo) Delete(ctx context.Context, id string) error {
	if err := r.st.Delete(ctx, backupPrefix(id)+manifestName); err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	var keys []string
	err := r.st.List(ctx, backupPrefix(id), func(oi storage.ObjectInfo) error {
		keys = append(keys, oi.Key)
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, k := range keys {
		g.Go(func() error { return r.st.Delete(gctx, k) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	return nil
}
