package safepath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	good := []string{"ibdata1", "db/t1.ibd", "./xtrabackup_info", "d b/t\u00e9.ibd", "a/b/c"}
	for _, p := range good {
		if err := Check(p); err != nil {
			t.Errorf("Check(%q) = %v, want nil", p, err)
		}
	}
	bad := []string{"", "..", "../x", "a/../b", "a/..", "/etc/passwd", "a//b", "a/./b", "a/", "x\x00y",
		strings.Repeat("a", MaxLen+1), "db/" + strings.Repeat("b", MaxComponent+1), "."}
	for _, p := range bad {
		if err := Check(p); !errors.Is(err, ErrUnsafe) {
			t.Errorf("Check(%q) = %v, want ErrUnsafe", p, err)
		}
	}
}

func TestJoinRefusesSymlinks(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "db"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(root, "db", "link.ibd")); err != nil {
		t.Fatal(err)
	}
	if p, err := Join(root, "db/new.ibd"); err != nil || p != filepath.Join(root, "db", "new.ibd") {
		t.Fatalf("Join(db/new.ibd) = %q, %v", p, err)
	}
	if p, err := Join(root, "./new/deeper/x"); err != nil || p != filepath.Join(root, "new", "deeper", "x") {
		t.Fatalf("Join(./new/deeper/x) = %q, %v", p, err)
	}
	for _, rel := range []string{"evil/x.ibd", "evil", "db/link.ibd", "../x"} {
		if _, err := Join(root, rel); !errors.Is(err, ErrUnsafe) {
			t.Errorf("Join(%q) = %v, want ErrUnsafe", rel, err)
		}
	}
	if _, err := MkdirParents(root, "evil/sub/x", 0o750); !errors.Is(err, ErrUnsafe) {
		t.Errorf("MkdirParents through a link = %v, want ErrUnsafe", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); !os.IsNotExist(err) {
		t.Errorf("MkdirParents created a directory outside the root")
	}
	if err := os.WriteFile(filepath.Join(root, "db", "file"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Join(root, "db/file/x"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Join through a file = %v, want ErrUnsafe", err)
	}
	if err := CheckTree(root); !errors.Is(err, ErrUnsafe) {
		t.Errorf("CheckTree = %v, want ErrUnsafe for the links", err)
	}
	clean := t.TempDir()
	os.MkdirAll(filepath.Join(clean, "a", "b"), 0o750)
	os.WriteFile(filepath.Join(clean, "a", "b", "f"), []byte("x"), 0o640)
	if err := CheckTree(clean); err != nil {
		t.Errorf("CheckTree on a clean tree = %v", err)
	}
}
