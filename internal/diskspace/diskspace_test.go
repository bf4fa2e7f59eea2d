package diskspace

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	free, err := Free(filepath.Join(dir, "not", "yet"))
	if err != nil || free <= 0 {
		t.Fatalf("Free of a path to create: %d, %v", free, err)
	}
	if err := Check(dir, 1, "a byte"); err != nil {
		t.Fatalf("one byte refused: %v", err)
	}
	err = Check(filepath.Join(dir, "new"), free+1<<40, "the restored datadir")
	if !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a need beyond the free space passed: %v", err)
	}
	for _, want := range []string{"the restored datadir", dir, "needed", "free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{10: "10 B", 1536: "1.5 KiB", 300 << 20: "300 MiB", 3 << 30: "3.0 GiB"} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %q, want %q", n, got, want)
		}
	}
}
