package backup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
