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
