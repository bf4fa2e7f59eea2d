package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// TestLayOutClearsUncoveredRanges: a resumed restore re-checks only the blobs, so the
// ranges of a sparse file no blob covers, which an earlier run's recovery or replay may
// have written, are zeros again after layOut, and the blobs' bytes stay.
func TestLayOutClearsUncoveredRanges(t *testing.T) {
	dir := t.TempDir()
	const ps = 4096
	f := manifest.File{Path: "db/t.ibd", Size: 4 * ps, Sparse: true,
		Blobs: []manifest.Blob{{RawOffset: ps, RawSize: ps}}}
	os.MkdirAll(filepath.Join(dir, "db"), 0o750)
	written := bytes.Repeat([]byte{7}, 4*ps) // what an interrupted run left
	if err := os.WriteFile(filepath.Join(dir, "db/t.ibd"), written, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := LayOut(dir, &manifest.Manifest{Files: []manifest.File{f}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "db/t.ibd"))
	if len(got) != 4*ps {
		t.Fatalf("size %d", len(got))
	}
	for i := range 4 {
		page := got[i*ps : (i+1)*ps]
		zero := bytes.Count(page, []byte{0}) == ps
		if covered := i == 1; covered == zero {
			t.Errorf("page %d: zero %v, covered by a blob %v", i, zero, covered)
		}
	}
}
