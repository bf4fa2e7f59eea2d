package main

import (
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
)

// TestTrackerStallHook: the tracker-stall hook takes effect only in a binary built with
// -tags testhooks (as the e2e tests build theirs); a production build ignores the
// variable.
func TestTrackerStallHook(t *testing.T) {
	t.Setenv("FERRY_TEST_TRACKER_STALL", "12s")
	var cfg backup.Config
	applyTestHooks(&cfg)
	want := time.Duration(0)
	if testHooksBuilt {
		want = 12 * time.Second
	}
	if cfg.TrackerStall != want {
		t.Fatalf("TrackerStall = %v with FERRY_TEST_TRACKER_STALL=12s, want %v (testhooks built: %v)", cfg.TrackerStall, want, testHooksBuilt)
	}
}
