package stream

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb/hostile"
)

// TestManyOpenFilesAreRefused: a stream opening thousands of files at once is refused
// with one line once it passes the budget's limit, and the heap stays small; before
// the limit, nothing is refused.
func TestManyOpenFilesAreRefused(t *testing.T) {
	const budget = 16 << 20
	s := hostile.OpenFilesStream(2000)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Unpack(context.Background(), bytes.NewReader(s), t.TempDir(), UnpackOptions{MaxMemory: budget})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "files open at once") || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("a stream opening 2000 files: %v", err)
	}
	grew := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("refused after %d files; %d MiB allocated in all", OpenLimit(budget), grew>>20)
	if limit := int64(budget + OpenLimit(budget)*perFile*2); grew > limit {
		t.Fatalf("unpacking allocated %d MiB in all, more than the budget and %d open files allow (%d MiB)", grew>>20, OpenLimit(budget), limit>>20)
	}
	// Just under the limit, the stream is not refused for its open files (it ends
	// before they do: the error is the truncation).
	_, err = Unpack(context.Background(), bytes.NewReader(hostile.OpenFilesStream(OpenLimit(budget))), t.TempDir(), UnpackOptions{MaxMemory: budget})
	if err == nil || strings.Contains(err.Error(), "open at once") || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("a stream with %d files open: %v, want only the truncation", OpenLimit(budget), err)
	}
}
