package repo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/pipeline"
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
