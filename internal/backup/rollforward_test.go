package backup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRemoveStaleScratch: the scratch directory of a killed ferry (a pid that no
// longer runs) is removed; this process's, a running process's and other
// directories are kept.
func TestRemoveStaleScratch(t *testing.T) {
	root := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{ // name → kept
		fmt.Sprintf("%s%d-123", scratchPrefix, dead.Process.Pid): false,
		fmt.Sprintf("%s%d-456", scratchPrefix, os.Getpid()):      true,
		fmt.Sprintf("%s%d-789", scratchPrefix, 1):                true, // init runs
		"ferry-rollforward-x":                                    true,
		"unrelated":                                              true,
	}
	for n := range names {
		if err := os.MkdirAll(filepath.Join(root, n, "db"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleScratch(root)
	for n, kept := range names {
		if _, err := os.Stat(filepath.Join(root, n)); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", n, err == nil, kept)
		}
	}
}

// TestRollPays: the roll-forward runs when there is redo worth dropping and the pages
// to read again are at most twice its bytes; bench/prepare.sh's random writes over 4 GB
// (1.1 GB of pages for 173 MB of redo) do not qualify, a hot set does.
func TestRollPays(t *testing.T) {
	for _, c := range []struct {
		changed, redo int64
		want          bool
	}{
		{1109 << 20, 173 << 20, false},
		{47 << 20, 33 << 20, true},
		{64 << 20, 32 << 20, true},
		{65 << 20, 32 << 20, false},
		{1 << 20, keepTarget, false}, // too little redo
	} {
		if got := rollPays(c.changed, c.redo); got != c.want {
			t.Errorf("rollPays(%d MiB changed, %d MiB redo) = %v", c.changed>>20, c.redo>>20, got)
		}
		if !c.want && rollWhyNot(c.changed, c.redo) == "" {
			t.Errorf("no reason given for %d MiB changed, %d MiB redo", c.changed>>20, c.redo>>20)
		}
	}
}

// TestRollPaysAtRate: a round run only for the roll-forward is left out when reading the
// changed pages again (at the copy's rate or --max-rate) lets the server write more than
// half the redo the roll drops: bench/capped.sh's bulk updates (427 MB of pages at
// 8 MiB/s while the server writes 20 MB/s of redo, 1.28 GB to drop) took 7 minutes that
// way instead of one. A hot set read at the copy's rate qualifies.
func TestRollPaysAtRate(t *testing.T) {
	const mib = 1 << 20
	capped := recopyEstimate{elapsed: 65 * time.Second, copied: 500 * mib, maxRate: 8 * mib, changed: 427 * mib, redo: 1280 * mib}
	if pays, why := capped.rollPays(); pays || !strings.Contains(why, "while the server writes") {
		t.Errorf("capped bulk updates: roll pays %v (%q), want not, for the redo written meanwhile", pays, why)
	}
	hot := recopyEstimate{elapsed: 10 * time.Second, copied: 10 << 30, changed: 64 * mib, redo: 1000 * mib}
	if pays, why := hot.rollPays(); !pays {
		t.Errorf("hot set at the copy's rate: roll does not pay (%q)", why)
	}
	hot.changed = 3000 * mib
	if pays, why := hot.rollPays(); pays || !strings.Contains(why, "to drop") {
		t.Errorf("more pages than twice the redo: roll pays %v (%q)", pays, why)
	}
}
