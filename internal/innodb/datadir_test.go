//go:build e2e

package innodb

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestCheckDatadir validates every page of every tablespace in the datadir named by
// FERRY_INNODB_DATADIR (a stopped server's, e.g. the one testdata/gen.sh leaves in
// /tmp/innodbfx/d), or else of a fresh server's datadir holding plain, page_compressed,
// ROW_FORMAT=COMPRESSED and full_crc32 tables, stopped cleanly first.
func TestCheckDatadir(t *testing.T) {
	dir := os.Getenv("FERRY_INNODB_DATADIR")
	if dir == "" {
		dir = freshDatadir(t)
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

// freshDatadir starts a server, writes tables of every page format, stops it and
// returns its datadir.
func freshDatadir(t *testing.T) string {
	s := testdb.Start(t, testdb.Options{ServerID: 1})
	s.Exec(t, "CREATE DATABASE fx")
	for _, q := range []string{
		"CREATE TABLE fx.plain (id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=InnoDB",
		"CREATE TABLE fx.pc (id INT PRIMARY KEY, v TEXT) ENGINE=InnoDB PAGE_COMPRESSED=1",
		"CREATE TABLE fx.zip (id INT PRIMARY KEY, v TEXT) ENGINE=InnoDB ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8",
		"INSERT INTO fx.plain SELECT seq, REPEAT('p', 150) FROM fx.seq_1_to_20000",
		"INSERT INTO fx.pc SELECT seq, REPEAT('compressed ', 30) FROM fx.seq_1_to_10000",
		"INSERT INTO fx.zip SELECT seq, REPEAT('zip ', 40) FROM fx.seq_1_to_5000",
	} {
		s.Exec(t, q)
	}
	s.Stop(t)
	return s.Datadir
}
