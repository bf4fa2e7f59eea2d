package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/storage"
)

// TestExpireCarriesThePlanOut: a dry run tells of every backup the plan lets go and
// deletes nothing; the real run deletes them, expired first then debris, and leaves
// the kept ones; the plan says why a base is kept and hands the kept manifests on.
func TestExpireCarriesThePlanOut(t *testing.T) {
	ctx := context.Background()
	r, _ := Init(ctx, newFS(t), "test")
	storeChain(t, r,
		testLink{id: "20260101t000000z-f0", end: 50},
		testLink{id: "20260102t000000z-f1", end: 100},
		testLink{id: "20260103t000000z-i1", base: "20260102t000000z-f1", from: 100, end: 200},
	)
	w, err := r.NewBackup(ctx, "20260104t000000z-dd", WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w.Abort(errors.New("killed"))
	plan, err := r.PlanExpire(ctx, Policy{KeepLast: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if why := plan.KeptFor("20260102t000000z-f1"); why != "base of kept incremental 20260103t000000z-i1" {
		t.Errorf("kept for %q", why)
	}
	if why := plan.KeptFor("20260103t000000z-i1"); why != "" {
		t.Errorf("kept by the rules, but kept for %q", why)
	}
	if ms := plan.KeptManifests(); len(ms) != 2 || ms[0].ID != "20260103t000000z-i1" {
		t.Errorf("kept manifests %v", ms)
	}
	run := func(dry bool) string {
		var told []string
		err := r.Expire(ctx, plan, ExpireOptions{DryRun: dry, Deleting: func(e Entry) { told = append(told, e.ID) }})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(told, " ")
	}
	const gone = "20260101t000000z-f0 20260104t000000z-dd"
	if told := run(true); told != gone {
		t.Fatalf("dry run told %s, want %s", told, gone)
	}
	if list, _ := r.List(ctx); len(list) != 4 {
		t.Fatalf("the dry run deleted: %d backups left", len(list))
	}
	if told := run(false); told != gone {
		t.Fatalf("expire told %s, want %s", told, gone)
	}
	list, _ := r.List(ctx)
	if len(list) != 2 || list[0].ID != "20260102t000000z-f1" || list[1].ID != "20260103t000000z-i1" {
		t.Fatalf("after expire: %+v", list)
	}
}

// TestExpireCalendarRules: --keep-daily/weekly/monthly keep the newest backup of each
// of the last N periods that have one (restic's semantics), in the policy's time zone,
// at a fixed "now"; each kept backup says which rules keep it, and an incremental kept
// by a rule keeps its base.
func TestExpireCalendarRules(t *testing.T) {
	ctx := context.Background()
	r, _ := Init(ctx, newFS(t), "test")
	at := func(s string) time.Time {
		ts, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	id := func(ts time.Time, kind string) string { return ts.Format("20060102t150405z-") + kind }
	var end uint64 = 100
	for d := at("2026-10-01 02:00"); !d.After(at("2026-11-09 02:00")); d = d.Add(24 * time.Hour) {
		end += 100
		storeLink(t, r, testLink{id: id(d, "f"), end: end}, d)
	}
	late := at("2026-11-09 14:00") // a second backup that day: the newer one is the day's
	storeLink(t, r, testLink{id: id(late, "f"), end: end + 50}, late)
	full, inc := at("2026-11-10 02:00"), at("2026-11-11 02:00")
	storeLink(t, r, testLink{id: id(full, "f"), end: end + 100}, full)
	storeLink(t, r, testLink{id: id(inc, "i"), base: id(full, "f"), from: end + 100, end: end + 200}, inc)
	now := at("2026-11-12 00:00")

	plan, err := r.PlanExpire(ctx, Policy{KeepDaily: 3, KeepWeekly: 2, KeepMonthly: 2, Location: time.UTC}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		id(inc, "i"):                    "newest, daily 2026-11-11, weekly 2026-W46, monthly 2026-11",
		id(full, "f"):                   "daily 2026-11-10",
		id(late, "f"):                   "daily 2026-11-09",
		id(at("2026-11-08 02:00"), "f"): "weekly 2026-W45",
		id(at("2026-10-31 02:00"), "f"): "monthly 2026-10",
	}
	checkKept(t, plan, want)
	if len(plan.Expired) != 43-len(want) { // 40 daily fulls, the late one, the full and its incremental
		t.Errorf("%d expired, want %d", len(plan.Expired), 43-len(want))
	}

	// Only the last day: the incremental is kept by the rule, its full as its base.
	plan, err = r.PlanExpire(ctx, Policy{KeepDaily: 1, Location: time.UTC}, now)
	if err != nil {
		t.Fatal(err)
	}
	checkKept(t, plan, map[string]string{
		id(inc, "i"):  "newest, daily 2026-11-11",
		id(full, "f"): "base of kept incremental " + id(inc, "i"),
	})
	// The same instants in a zone 3 hours behind UTC: 2026-11-09 02:00 UTC is still
	// the 8th there, so the last three days are the 10th, 9th and 8th.
	plan, err = r.PlanExpire(ctx, Policy{KeepDaily: 3, Location: time.FixedZone("UTC-3", -3*3600)}, now)
	if err != nil {
		t.Fatal(err)
	}
	checkKept(t, plan, map[string]string{
		id(inc, "i"):                    "newest, daily 2026-11-10",
		id(full, "f"):                   "daily 2026-11-09",
		id(at("2026-11-09 02:00"), "f"): "daily 2026-11-08",
	})
	if err := (Policy{}).Check(); err == nil || !strings.Contains(err.Error(), "daily") {
		t.Errorf("an empty policy: %v", err)
	}
}

// checkKept checks that plan keeps exactly the backups of want, each for its reasons.
func checkKept(t *testing.T, plan *ExpirePlan, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range plan.Keep {
		got[e.ID] = plan.Why(e.ID)
	}
	for id, why := range want {
		if got[id] != why {
			t.Errorf("%s: kept for %q, want %q", id, got[id], why)
		}
	}
	for id, why := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s kept (%s), want it expired", id, why)
		}
	}
}

// TestExpireKeepsLockedBackups: a backup whose recorded Object Lock holds at "now" is
// kept whatever the rules say, with the date it can go (an incremental kept so keeps
// its base; interrupted debris with a lock in its marker too); once the date has
// passed at "now", the same backups are let go. Fixed dates, no waiting.
func TestExpireKeepsLockedBackups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storage.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := Init(ctx, st, "test")
	day := func(d int) time.Time { return time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC) }
	until := day(10)
	lock := &manifest.Lock{Mode: "GOVERNANCE", RetainUntil: until}
	const (
		f0, f1, f2, i2, f3 = "20260101t000000z-f0", "20260102t000000z-f1", "20260103t000000z-f2", "20260104t000000z-i2", "20260105t000000z-f3"
		locked, debris     = "20260106t000000z-dl", "20260106t000000z-dd"
	)
	storeLink(t, r, testLink{id: f0, end: 100}, day(1))
	relock(t, r, storeLink(t, r, testLink{id: f1, end: 200}, day(2)), lock)
	storeLink(t, r, testLink{id: f2, end: 300}, day(3))
	relock(t, r, storeLink(t, r, testLink{id: i2, base: f2, from: 300, end: 400}, day(4)), lock)
	storeLink(t, r, testLink{id: f3, end: 500}, day(5))
	for id, l := range map[string]*manifest.Lock{locked: lock, debris: nil} {
		mk := Marker{ID: id, Host: "elsewhere", Started: day(5), Lock: l}
		if err := putJSON(ctx, r.st, backupPrefix(id)+markerName, mk); err != nil {
			t.Fatal(err)
		}
		// Written by another host, long ago: interrupted, not running.
		old := time.Now().Add(-2 * StaleAfter)
		if err := os.Chtimes(filepath.Join(dir, backupPrefix(id), markerName), old, old); err != nil {
			t.Fatal(err)
		}
	}

	plan, err := r.PlanExpire(ctx, Policy{KeepLast: 1}, day(6))
	if err != nil {
		t.Fatal(err)
	}
	why := "locked until 2026-01-10T00:00:00Z (governance): it can go then"
	checkKept(t, plan, map[string]string{f3: "newest, last 1", f1: why, i2: why, f2: "base of kept incremental " + i2, locked: why})
	if got := gone(plan); got != f0+" "+debris {
		t.Errorf("at day 6, the plan lets go %s, want %s %s", got, f0, debris)
	}

	plan, err = r.PlanExpire(ctx, Policy{KeepLast: 1}, until) // the date itself: the lock is over
	if err != nil {
		t.Fatal(err)
	}
	checkKept(t, plan, map[string]string{f3: "newest, last 1"})
	if got, want := gone(plan), strings.Join([]string{i2, f2, f1, f0, locked, debris}, " "); got != want {
		t.Errorf("at the lock's date, the plan lets go %s, want %s", got, want)
	}
}

// relock records lock in a stored backup's manifest, as a backup to a locked bucket
// does.
func relock(t *testing.T, r *Repo, m *manifest.Manifest, lock *manifest.Lock) {
	t.Helper()
	m.Lock = lock
	if err := putJSON(context.Background(), r.st, backupPrefix(m.ID)+manifestName, m); err != nil {
		t.Fatal(err)
	}
}

// gone lists what a plan lets go: the expired backups, then the debris.
func gone(plan *ExpirePlan) string {
	var ids []string
	for _, e := range append(slices.Clone(plan.Expired), plan.Debris...) {
		ids = append(ids, e.ID)
	}
	return strings.Join(ids, " ")
}

// TestLockRefusedWithoutObjectLock: a locked backup into a directory is refused with
// one line saying why, before anything is written.
func TestLockRefusedWithoutObjectLock(t *testing.T) {
	ctx := context.Background()
	st := newFS(t)
	r, _ := Init(ctx, st, "test")
	_, err := r.NewBackup(ctx, "20260101t000000z-f0", WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20, LockFor: 24 * time.Hour})
	if err == nil || !strings.Contains(err.Error(), "is not an S3 bucket and cannot lock objects") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a locked backup into a directory: %v", err)
	}
	n := 0
	if err := st.List(ctx, "", func(storage.ObjectInfo) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("%d objects written (%v)", n, err)
	}
}
