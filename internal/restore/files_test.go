package restore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyDDLMarkers applies every kind of mariadb-backup marker in its order: .del
// before .ren before .new, so a table dropped and re-created, a renamed one and a
// swapped pair all end as the server had them.
func TestApplyDDLMarkers(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"db/dropped.ibd": "old", "db/dropped.del": "",
		"db/recreated.ibd": "stale", "db/recreated.del": "", "db/recreated.new": "fresh",
		"db/a.ibd": "A", "db/a.ren": "./db/b.ibd",
		"db/c.ibd": "C", "db/c.ren": "db/d",
		"db/created.new": "brand new",
		"db/kept.ibd":    "kept",
		"db/x.ibd":       "X", "db/x.ren": "db/y", "db/y.ibd": "Y", "db/y.ren": "db/x",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o750)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := applyDDLMarkers(dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"db/recreated.ibd": "fresh", "db/b.ibd": "A", "db/d.ibd": "C", "db/created.ibd": "brand new", "db/kept.ibd": "kept",
		"db/x.ibd": "Y", "db/y.ibd": "X"}
	got := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			got[rel] = string(b)
		}
		return nil
	})
	if len(got) != len(want) {
		t.Errorf("files after markers: %v, want %v", got, want)
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("%s = %q, want %q", p, got[p], c)
		}
	}
}

func TestRenameMarkerCannotLeaveTheBackup(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "db"), 0o750)
	os.WriteFile(filepath.Join(dir, "db/a.ibd"), []byte("A"), 0o640)
	os.WriteFile(filepath.Join(dir, "db/a.ren"), []byte("../../etc/evil"), 0o640)
	err := applyDDLMarkers(dir)
	if err == nil || !strings.Contains(err.Error(), "not a table in the backup") {
		t.Fatalf("escaping .ren: %v", err)
	}
}
