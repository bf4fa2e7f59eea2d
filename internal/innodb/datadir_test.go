package innodb

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckDatadir validates every page of every tablespace in the datadir named by
// FERRY_INNODB_DATADIR (a stopped server's, e.g. the one testdata/gen.sh leaves in
// /tmp/innodbfx/d). Skipped when the variable is unset.
func TestCheckDatadir(t *testing.T) {
	dir := os.Getenv("FERRY_INNODB_DATADIR")
	if dir == "" {
		t.Skip("FERRY_INNODB_DATADIR not set")
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		base := d.Name()
		system := base == "ibdata1"
		if system || strings.HasSuffix(base, ".ibd") || strings.HasPrefix(base, "undo") {
			n += checkFile(t, path, system)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pages valid", n)
}

// checkFile validates every page of one tablespace file and returns the page count.
func checkFile(t *testing.T, path string, system bool) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseSpaceHeader(b)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return 0
	}
	c := NewChecker(h, system)
	ps := c.PageSize()
	for i := 0; i+ps <= len(b); i += ps {
		if err := c.Check(b[i:i+ps], uint32(i/ps)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	return len(b) / ps
}
