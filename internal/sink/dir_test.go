package sink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// TestDir: a directory end refuses a non-empty target before anything is written, is
// marked incomplete from Open until Commit, takes rewrites, removes and renames, and
// says on Abort how the partial backup is left.
func TestDir(t *testing.T) {
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o600)
	if _, err := NewDir(full); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("NewDir of a non-empty directory: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	d, err := NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("NewDir created %s before Open", dir)
	}
	if err := d.Open(context.Background(), "id"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err != nil {
		t.Fatalf("no incomplete marker after Open: %v", err)
	}
	if c := d.Caps(); !c.Rewrite || !c.Direct || c.Remote || c.Storage.Format != "dir" {
		t.Errorf("Caps = %+v", c)
	}
	f, err := d.Create("db/t.ibd", FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("bbbb"), 4)
	f.WriteAt([]byte("aaaa"), 0)
	if err := f.Close(8); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("db/t.ibd", "db2/u.ibd"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "db2/u.ibd")); string(b) != "aaaabbbb" {
		t.Errorf("renamed file holds %q", b)
	}
	if err := d.Remove("db2/u.ibd"); err != nil || d.Remove("db2/u.ibd") != nil {
		t.Errorf("Remove: %v", err)
	}
	if !strings.Contains(d.Abort(nil), "marked incomplete") {
		t.Errorf("Abort = %q", d.Abort(nil))
	}
	m := &manifest.Manifest{Format: manifest.FormatVersion, ID: "id"}
	if err := d.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); !os.IsNotExist(err) {
		t.Errorf("the incomplete marker is still there after Commit")
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.FileName)); err != nil {
		t.Errorf("no manifest after Commit: %v", err)
	}
}
