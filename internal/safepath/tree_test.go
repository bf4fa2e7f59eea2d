package safepath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestTreeChecksEachDirectoryOnce: a Tree gives Join's paths, refuses what Join
// refuses (unsafe names, a link on the way), and does not look at a directory again.
func TestTreeChecksEachDirectoryOnce(t *testing.T) {
	root := t.TempDir()
	tr := NewTree(root)
	p, err := tr.MkdirParents("db/t1.ibd", 0o750)
	if err != nil || p != filepath.Join(root, "db", "t1.ibd") {
		t.Fatalf("MkdirParents = %q, %v", p, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "db")); err != nil || !fi.IsDir() {
		t.Fatalf("db was not made: %v", err)
	}
	if _, err := tr.Join("../escape"); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("Join(../escape) = %v, want ErrUnsafe", err)
	}
	// A link on the way is refused the first time its directory is met...
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Join("linked/t.ibd"); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("Join through a link = %v, want ErrUnsafe", err)
	}
	if _, err := tr.MkdirParents("linked/t.ibd", 0o750); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("MkdirParents through a link = %v, want ErrUnsafe", err)
	}
	// ...and a directory checked once is not looked at again: the next file of db
	// costs no lookup, even after db is gone.
	if err := os.RemoveAll(filepath.Join(root, "db")); err != nil {
		t.Fatal(err)
	}
	if p, err := tr.Join("db/t2.ibd"); err != nil || p != filepath.Join(root, "db", "t2.ibd") {
		t.Fatalf("Join of a known directory = %q, %v", p, err)
	}
}
