//go:build e2e

package innodb

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// mysqlTables are the tables TestMySQLDatadir creates once per checksum algorithm
// (ALG is the algorithm), and the rows they get: a plain table with a secondary index,
// ROW_FORMAT=COMPRESSED with both small block sizes, a partitioned table, BLOBs (the
// 8.0 LOB pages), a table in a general tablespace, a table most of whose rows are
// deleted, and transparent page compression.
var mysqlTables = []string{
	"CREATE TABLE fx.plain_ALG (id INT PRIMARY KEY, v VARCHAR(200), KEY (v))",
	"CREATE TABLE fx.zip4_ALG (id INT PRIMARY KEY, v VARCHAR(200)) ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=4",
	"CREATE TABLE fx.zip8_ALG (id INT PRIMARY KEY, v VARCHAR(200), b BLOB) ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8",
	"CREATE TABLE fx.part_ALG (id INT PRIMARY KEY, v VARCHAR(200)) PARTITION BY HASH (id) PARTITIONS 3",
	"CREATE TABLE fx.blob_ALG (id INT PRIMARY KEY, b LONGBLOB)",
	"CREATE TABLESPACE gts_ALG ADD DATAFILE 'gts_ALG.ibd'",
	"CREATE TABLE fx.gen_ALG (id INT PRIMARY KEY, v VARCHAR(200)) TABLESPACE gts_ALG",
	"CREATE TABLE fx.holes_ALG (id INT PRIMARY KEY, v VARCHAR(2000))",
	"CREATE TABLE fx.pcz_ALG (id INT PRIMARY KEY, v VARCHAR(200)) COMPRESSION='zlib'",
	"CREATE TABLE fx.pcl_ALG (id INT PRIMARY KEY, v VARCHAR(200)) COMPRESSION='lz4'",
	"INSERT INTO fx.plain_ALG SELECT n, CONCAT('row ', n, REPEAT(CHAR(65 + n % 26), n % 150)) FROM fx.seq",
	"INSERT INTO fx.zip4_ALG SELECT id, v FROM fx.plain_ALG WHERE id <= 10000",
	"INSERT INTO fx.zip8_ALG SELECT id, v, IF(id % 100 = 0, REPEAT(SHA2(id, 256), 300), NULL) FROM fx.plain_ALG WHERE id <= 20000",
	"INSERT INTO fx.part_ALG SELECT id, v FROM fx.plain_ALG",
	"INSERT INTO fx.blob_ALG SELECT n, REPEAT(SHA2(n, 512), n * 20) FROM fx.seq WHERE n <= 150",
	"INSERT INTO fx.gen_ALG SELECT id, v FROM fx.plain_ALG WHERE id <= 20000",
	"INSERT INTO fx.holes_ALG SELECT n, REPEAT('h', 1500) FROM fx.seq",
	"DELETE FROM fx.holes_ALG WHERE id BETWEEN 5000 AND 25000",
	"INSERT INTO fx.pcz_ALG SELECT id, v FROM fx.plain_ALG WHERE id <= 10000",
	"INSERT INTO fx.pcl_ALG SELECT id, v FROM fx.plain_ALG WHERE id <= 10000",
}

// TestMySQLDatadir runs MySQL 8.0 with tables written under each
// innodb_checksum_algorithm (set with SET GLOBAL before they are created), stops it
// cleanly and checks every page of every InnoDB file: all valid except the page-
// compressed tables' (unsupported), and a flipped byte detected in every page written
// with a checksum (not "none", 0xDEADBEEF; pages are written with the algorithm set
// when they are flushed, not when their table was created). "none" is left to the
// fixtures (mysql_none), and so is the free-page map (mysql_xdes4k): a MySQL backup
// copies free pages as they are.
func TestMySQLDatadir(t *testing.T) {
	s := testdb.StartMySQL(t, testdb.MySQLOptions{NoBinlog: true})
	s.Exec(t, "CREATE DATABASE fx")
	s.Exec(t, "CREATE TABLE fx.seq (n INT PRIMARY KEY)")
	s.Exec(t, `INSERT INTO fx.seq WITH RECURSIVE d(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM d WHERE n < 199)
		SELECT a.n * 200 + b.n + 1 FROM d a, d b WHERE a.n < 150`) // 1..30000
	for _, algo := range []string{"crc32", "innodb"} {
		s.Exec(t, "SET GLOBAL innodb_checksum_algorithm = "+algo)
		for _, q := range mysqlTables {
			s.Exec(t, strings.ReplaceAll(q, "ALG", algo))
		}
	}
	s.Exec(t, "SET GLOBAL innodb_checksum_algorithm = crc32")
	s.Exec(t, "SET GLOBAL innodb_fast_shutdown = 0")
	s.Stop(t)

	files := innodbFiles(t, s.Datadir)
	for _, path := range files {
		checkMySQLFile(t, path)
	}
	t.Logf("%d files checked", len(files))
}

// innodbFiles lists the InnoDB tablespace files of a datadir.
func innodbFiles(t *testing.T, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n := d.Name()
		if n == "ibdata1" || n == "mysql.ibd" || strings.HasPrefix(n, "undo_") || strings.HasSuffix(n, ".ibd") || strings.HasSuffix(n, ".ibu") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkMySQLFile checks every page of one file, and a copy of each page written with a
// checksum with a byte flipped in its body.
func checkMySQLFile(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseSpaceHeader(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	h.Flavor = FlavorMySQL
	system := filepath.Base(path) == "ibdata1"
	c := NewChecker(h, system)
	ps := c.PageSize()
	base := filepath.Base(path)
	pcomp := strings.HasPrefix(base, "pcz_") || strings.HasPrefix(base, "pcl_")
	for i := 0; i+ps <= len(b); i += ps {
		no, p := uint32(i/ps), b[i:i+ps]
		err := c.Check(p, no)
		var ue *UnsupportedPageError
		if pcomp && errors.As(err, &ue) && ue.Feature == FeatureMySQLPageCompression {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if be32(p, offChecksum) == noChecksum || IsZero(p) || (system && no >= c.dblwrLo && no < c.dblwrHi) {
			continue
		}
		q := append([]byte(nil), p...)
		q[ps/2] ^= 0x40
		var ce *CorruptPageError
		if !errors.As(c.Check(q, no), &ce) {
			t.Errorf("%s: page %d with a flipped byte passes", path, no)
		}
	}
}
