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
	if err := LayOut(dir, &manifest.Manifest{Files: []manifest.File{f}}, 2); err != nil {
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

// TestLayOutManyDirectories: the files of many directories, nested or at the top, laid
// out by several workers at once, are all there at their sizes, a stray is removed,
// and a file whose directory is a symbolic link is refused.
func TestLayOutManyDirectories(t *testing.T) {
	dir := t.TempDir()
	var files []manifest.File
	for i := range 60 {
		files = append(files, manifest.File{Path: filepath.Join("db"+string(rune('a'+i%7)), "sub"[:i%2*3], "t"+string(rune('a'+i%26))+string(rune('a'+i/26))+".ibd"), Size: int64(i * 100)})
	}
	files = append(files, manifest.File{Path: "ibdata1", Size: 12345})
	os.MkdirAll(filepath.Join(dir, "dba"), 0o750)
	os.WriteFile(filepath.Join(dir, "dba", "stray.ibd"), []byte("x"), 0o640)
	if err := LayOut(dir, &manifest.Manifest{Files: files}, 4); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, f.Path))
		if err != nil || fi.Size() != f.Size {
			t.Errorf("%s: %v, want %d bytes", f.Path, err, f.Size)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dba", "stray.ibd")); !os.IsNotExist(err) {
		t.Errorf("the stray file is still there: %v", err)
	}
	os.Symlink(t.TempDir(), filepath.Join(dir, "linked"))
	bad := &manifest.Manifest{Files: append(files, manifest.File{Path: "linked/t.ibd", Size: 1})}
	if err := LayOut(dir, bad, 4); err == nil {
		t.Error("a file under a symbolic link was laid out")
	}
}
