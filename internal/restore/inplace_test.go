package restore

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func write(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSwapContents: the datadir directory stays (a joiner's mariadbd runs in it), its
// old entries move aside but the node's own, the copy's move in; a clash puts
// everything back.
func TestSwapContents(t *testing.T) {
	root := t.TempDir()
	datadir, staging := filepath.Join(root, "data"), filepath.Join(root, ".data.staging")
	write(t, datadir, "ibdata1", "db/t.ibd", "grastate.dat", "mysql-bin.000001")
	write(t, staging, "ibdata1", "db/t.ibd", "newdb/x.ibd")
	before, _ := os.Stat(datadir)
	local := func(n string) bool { return n == "grastate.dat" }
	aside, err := swapContents(staging, datadir, datadir+".old", local)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, datadir); len(got) != 4 || got[0] != "db" || got[1] != "grastate.dat" || got[3] != "newdb" {
		t.Fatalf("datadir holds %v", got)
	}
	if got := names(t, aside); len(got) != 3 {
		t.Fatalf("old entries kept aside: %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(aside, "mysql-bin.000001")); string(b) != "mysql-bin.000001" {
		t.Fatal("the old binary log is not in the old datadir")
	}
	after, _ := os.Stat(datadir)
	if !os.SameFile(before, after) {
		t.Fatal("the datadir directory itself was replaced")
	}
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Fatalf("staging left: %v", err)
	}

	// A copy holding a file the node keeps: nothing moves.
	datadir2, staging2 := filepath.Join(root, "data2"), filepath.Join(root, ".data2.staging")
	write(t, datadir2, "ibdata1", "grastate.dat")
	write(t, staging2, "ibdata1", "grastate.dat")
	if _, err := swapContents(staging2, datadir2, datadir2+".old", local); err == nil {
		t.Fatal("a clash with a kept file was accepted")
	}
	if got := names(t, datadir2); len(got) != 2 {
		t.Fatalf("after a failed swap the datadir holds %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(datadir2, "ibdata1")); string(b) != "ibdata1" || len(names(t, staging2)) != 2 {
		t.Fatal("a failed swap did not put everything back")
	}
}
