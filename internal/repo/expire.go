package repo

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/storage"
	"golang.org/x/sync/errgroup"
)

// Policy says which complete backups expire keeps; a backup kept by any rule stays.
type Policy struct {
	KeepLast   int           // the newest KeepLast complete backups
	KeepWithin time.Duration // complete backups that ended less than this long ago
	// KeepDaily, KeepWeekly, KeepMonthly and KeepYearly keep, for each of the last N
	// days (ISO weeks, months, years) that have a complete backup, the newest backup
	// that ended in it, as restic's --keep-daily and the like do. Days are those of
	// Location (default the local time zone).
	KeepDaily, KeepWeekly, KeepMonthly, KeepYearly int
	Location                                       *time.Location
}

// Check refuses a policy that names no rule.
func (p Policy) Check() error {
	if p.KeepLast <= 0 && p.KeepWithin <= 0 && p.KeepDaily <= 0 && p.KeepWeekly <= 0 && p.KeepMonthly <= 0 && p.KeepYearly <= 0 {
		return setting.Errorf("say what to keep: %s N, %s D and/or %s N (expire never guesses)", setting.KeepLast, setting.KeepDays, setting.KeepCalendar)
	}
	return nil
}

// calendarRules are the policy's calendar rules: how many periods each keeps and the
// name of the period a time falls in.
func (p Policy) calendarRules() []calendarRule {
	return []calendarRule{
		{"daily", p.KeepDaily, func(t time.Time) string { return t.Format("2006-01-02") }},
		{"weekly", p.KeepWeekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{"monthly", p.KeepMonthly, func(t time.Time) string { return t.Format("2006-01") }},
		{"yearly", p.KeepYearly, func(t time.Time) string { return t.Format("2006") }},
	}
}

// calendarRule keeps the newest backup of each of its last n periods.
type calendarRule struct {
	name   string
	n      int
	period func(time.Time) string
}

// ExpirePlan is what expire would do.
type ExpirePlan struct {
	Keep    []Entry // complete backups kept, and backups still running
	Expired []Entry // complete backups the policy lets go
	Debris  []Entry // backups interrupted before their manifest
	// BaseOf says why a backup the policy let go is kept all the same: it maps its
	// id to the kept incremental (or running backup) that applies on it.
	BaseOf map[string]string
	// Rules says which of the policy's rules keep a backup ("last 2", "daily
	// 2026-11-28", ...), by id.
	Rules map[string][]string
	// Locked are the backups kept only because their Object Lock has not expired
	// (the server would refuse to delete them): the lock each records, by id.
	Locked map[string]*manifest.Lock
}

// PlanExpire applies p to the repository's backups at time now. The newest complete
// backup is always kept, and so is a backup still being written. A kept incremental
// keeps its bases, up to its full backup: they do not count towards KeepLast. A
// backup whose recorded Object Lock holds at now is kept too (its bases as well, if
// it is complete): it can go once its date has passed.
func (r *Repo) PlanExpire(ctx context.Context, p Policy, now time.Time) (*ExpirePlan, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	rules := p.keep(list, now)
	keep := make(map[string]bool, len(rules))
	for id := range rules {
		keep[id] = true
	}
	locked := map[string]*manifest.Lock{}
	keepLocked(list, keep, locked, now, true)
	plan := &ExpirePlan{BaseOf: keepBases(list, keep), Rules: rules, Locked: locked}
	keepLocked(list, keep, locked, now, false) // after keepBases: debris keeps no base

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

// keep returns the backups the policy keeps, each with the rules that keep it:
// running ones, the newest complete one, and the complete ones a rule keeps.
func (p Policy) keep(list []Entry, now time.Time) map[string][]string {
	keep := map[string][]string{}
	var complete []Entry // newest first
	for i := len(list) - 1; i >= 0; i-- {
		switch e := list[i]; e.Status {
		case StatusRunning:
			keep[e.ID] = append(keep[e.ID], "running")
		case StatusComplete:
			complete = append(complete, e)
		}
	}
	for i, e := range complete {
		if i == 0 {
			keep[e.ID] = append(keep[e.ID], "newest")
		}
		if i < p.KeepLast {
			keep[e.ID] = append(keep[e.ID], fmt.Sprintf("last %d", i+1))
		}
		if p.KeepWithin > 0 && now.Sub(e.Manifest.EndTime) < p.KeepWithin {
			keep[e.ID] = append(keep[e.ID], fmt.Sprintf("within %s", days(p.KeepWithin)))
		}
	}
	loc := p.Location
	if loc == nil {
		loc = time.Local
	}
	for _, r := range p.calendarRules() {
		seen, last := 0, ""
		for _, e := range complete {
			period := r.period(e.Manifest.EndTime.In(loc))
			if period == last || seen >= r.n {
				continue
			}
			seen, last = seen+1, period
			keep[e.ID] = append(keep[e.ID], r.name+" "+period)
		}
	}
	return keep
}

// keepLocked adds to keep, and to locked with their lock, the complete backups
// (unfinished ones if !complete) not kept yet whose lock holds at now.
func keepLocked(list []Entry, keep map[string]bool, locked map[string]*manifest.Lock, now time.Time, complete bool) {
	for _, e := range list {
		if l := e.Lock(); !keep[e.ID] && (e.Manifest != nil) == complete && l.LockedAt(now) {
			keep[e.ID], locked[e.ID] = true, l
		}
	}
}

// days spells a duration of whole days as "N days".
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
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
// other object under its prefix. In a bucket with Object Lock enabled (versioned), it
// deletes every version of them, which frees their space; a version whose lock has
// not expired is refused by the server (storage.ErrLocked), never bypassed.
func (r *Repo) Delete(ctx context.Context, id string) error {
	l, err := r.purger(ctx)
	if err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	if l != nil {
		return r.purge(ctx, l, id)
	}
	if err := r.st.Delete(ctx, backupPrefix(id)+manifestName); err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	var keys []string
	err = r.st.List(ctx, backupPrefix(id), func(oi storage.ObjectInfo) error {
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

// purge deletes every version of a backup's objects, its manifest's first.
func (r *Repo) purge(ctx context.Context, l storage.Locker, id string) error {
	if err := l.Purge(ctx, backupPrefix(id)+manifestName); err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	if err := l.Purge(ctx, backupPrefix(id)); err != nil {
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

// Why says which rules keep backup id ("newest, last 1, daily 2026-11-28") or, for a
// backup kept as the base of another, KeptFor's reason, or for one kept by its Object
// Lock, until when ("locked until 2026-12-30T10:00:00Z (governance): it can go
// then"); "" for a backup not kept.
func (p *ExpirePlan) Why(id string) string {
	if rules := p.Rules[id]; len(rules) > 0 {
		return strings.Join(rules, ", ")
	}
	if why := p.KeptFor(id); why != "" {
		return why
	}
	if l := p.Locked[id]; l != nil {
		return fmt.Sprintf("locked until %s (%s): it can go then", l.RetainUntil.Format(time.RFC3339), strings.ToLower(l.Mode))
	}
	return ""
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
