package repo

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/setting"
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
		return setting.Errorf("say what to keep: %s N and/or %s D (expire never guesses)", setting.KeepLast, setting.KeepDays)
	}
	return nil
}

// ExpirePlan is what expire would do.
type ExpirePlan struct {
	Keep    []Entry // complete backups kept, and backups still running
	Expired []Entry // complete backups the policy lets go
	Debris  []Entry // backups interrupted before their manifest
	// BaseOf says why a backup the policy let go is kept all the same: it maps its
	// id to the kept incremental (or running backup) that applies on it.
	BaseOf map[string]string
}

// PlanExpire applies p to the repository's backups at time now. The newest complete
// backup is always kept, and so is a backup still being written. A kept incremental
// keeps its bases, up to its full backup: they do not count towards KeepLast.
func (r *Repo) PlanExpire(ctx context.Context, p Policy, now time.Time) (*ExpirePlan, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	keep := p.keep(list, now)
	plan := &ExpirePlan{BaseOf: keepBases(list, keep)}
	for i := len(list) - 1; i >= 0; i-- { // newest first
		e := list[i]
		switch {
		case keep[e.ID]:
			plan.Keep = append(plan.Keep, e)
		case e.Status == StatusIncomplete:
			plan.Debris = append(plan.Debris, e)
		default:
			plan.Expired = append(plan.Expired, e)
		}
	}
	return plan, nil
}

// keep returns the backups the policy keeps: running ones, the newest complete one,
// and the complete ones either rule keeps.
func (p Policy) keep(list []Entry, now time.Time) map[string]bool {
	keep := map[string]bool{}
	kept := 0
	for i := len(list) - 1; i >= 0; i-- { // newest first
		e := list[i]
		switch {
		case e.Status == StatusRunning:
			keep[e.ID] = true
		case e.Status == StatusIncomplete:
		case kept == 0 || kept < p.KeepLast || p.KeepWithin > 0 && now.Sub(e.Manifest.EndTime) < p.KeepWithin:
			kept++
			keep[e.ID] = true
		}
	}
	return keep
}

// keepBases adds to keep every complete backup a kept one applies on, through the
// chain up to its full backup, and returns, for each one added, the backup that
// needs it. A base missing or unfinished ends the walk: there is nothing to keep.
func keepBases(list []Entry, keep map[string]bool) map[string]string {
	byID := make(map[string]Entry, len(list))
	var todo []Entry
	for _, e := range list {
		byID[e.ID] = e
		if keep[e.ID] {
			todo = append(todo, e)
		}
	}
	baseOf := map[string]string{}
	for len(todo) > 0 {
		e := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		b, ok := byID[baseID(e)]
		if !ok || b.Manifest == nil || keep[b.ID] {
			continue
		}
		keep[b.ID], baseOf[b.ID] = true, e.ID
		todo = append(todo, b)
	}
	return baseOf
}

// baseID is the id of the backup e applies on, "" for a full backup.
func baseID(e Entry) string {
	switch {
	case e.Manifest != nil && e.Manifest.Incremental != nil:
		return e.Manifest.Incremental.BaseID
	case e.Manifest == nil && e.Marker != nil:
		return e.Marker.Base
	}
	return ""
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

// ExpireOptions say how Expire carries a plan out.
type ExpireOptions struct {
	DryRun bool // delete nothing: only tell Deleting what would go
	// Deleting, if set, is told of each backup before it is deleted (or, in a dry run,
	// instead): the expired ones, newest first, then the debris.
	Deleting func(Entry)
	Log      *slog.Logger // logs each deletion; nil: none
}

// Expire deletes what plan lets go: the expired backups, then the debris of
// interrupted ones, each with Delete (manifest first). It stops at the first failure,
// so what it told Deleting of last may still be there.
func (r *Repo) Expire(ctx context.Context, plan *ExpirePlan, o ExpireOptions) error {
	for _, e := range append(slices.Clip(plan.Expired), plan.Debris...) {
		if o.Deleting != nil {
			o.Deleting(e)
		}
		if o.DryRun {
			continue
		}
		if err := r.Delete(ctx, e.ID); err != nil {
			return err
		}
		if o.Log != nil {
			o.Log.Info("deleted", "backup", e.ID, "status", e.Status, "objects", e.Objects)
		}
	}
	return nil
}

// KeptFor says why the plan keeps backup id beyond its policy's rules: "base of kept
// incremental CHILD" or "base of running backup CHILD" when a backup kept applies on
// it, "" when the rules keep it themselves.
func (p *ExpirePlan) KeptFor(id string) string {
	child, ok := p.BaseOf[id]
	if !ok {
		return ""
	}
	for _, e := range p.Keep {
		if e.ID == child && e.Status == StatusRunning {
			return "base of running backup " + child
		}
	}
	return "base of kept incremental " + child
}

// KeptManifests are the manifests of the complete backups the plan keeps, newest
// first: what the binlog archive must still serve.
func (p *ExpirePlan) KeptManifests() []*manifest.Manifest {
	var kept []*manifest.Manifest
	for _, e := range p.Keep {
		if e.Manifest != nil {
			kept = append(kept, e.Manifest)
		}
	}
	return kept
}
