package innodb

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// fixture describes one tablespace sampled by testdata/gen.sh from MariaDB 10.11 or by
// testdata/gen_mysql.sh from MySQL 8.0.31.
type fixture struct {
	name      string // testdata/<name>.after.gz: pages 0..root; <name>.before.gz: page root earlier
	pageSize  int    // physical page size
	fullCRC32 bool
	zip       bool
	pcomp     bool
	crypt     bool
	// covered lists byte offsets (negative: from the page end) whose change the
	// checksum must detect; nil means every offset of the page.
	covered []int
	tornOK  bool // whether torn pages are detectable at all
	mysql   bool // written by MySQL: the clustered index root is page 4, after the SDI root
}

// root is the page of the clustered index root, sampled before and after an UPDATE.
func (f fixture) root() uint32 {
	if f.mysql {
		return 4
	}
	return 3
}

var (
	// Legacy checksums skip bytes 26..37 (flush LSN or key version, space id).
	legacyCovered = []int{0, 3, 4, 8, 16, 21, 24, 38, 100, 5000, 9000, -9, -8, -5, -1}
	// ROW_FORMAT=COMPRESSED checksums also skip the LSN (16..23).
	zipCovered = []int{0, 3, 4, 12, 24, 34, 38, 200, 4000, -500, -1}
	// The post-encryption checksum skips bytes 0..3 and the trailer checksum too (they
	// hold the checksum of the plaintext).
	encLegacyCovered = []int{4, 8, 16, 21, 24, 38, 100, 5000, 9000, -9, -1}
	// Legacy page_compressed pages have no checksum: only their header is tested.
	pcompLegacyCovered    = []int{0, 3, 31, 33}
	pcompEncLegacyCovered = []int{0, 3, 40, 41}
	// With innodb_checksum_algorithm=none only the checksum fields themselves (holding
	// 0xDEADBEEF) and the LSN copy in the trailer are tested.
	noneCovered    = []int{0, 3, 20, 23, -8, -5, -4, -1}
	zipNoneCovered = []int{0, 3}
)

var fixtures = []fixture{
	{name: "fcrc32", pageSize: 16384, fullCRC32: true, tornOK: true},
	{name: "pcomp", pageSize: 16384, fullCRC32: true, pcomp: true, tornOK: true},
	{name: "enc", pageSize: 16384, fullCRC32: true, crypt: true, tornOK: true},
	{name: "pcomp_enc", pageSize: 16384, fullCRC32: true, pcomp: true, crypt: true, tornOK: true},
	{name: "crc32", pageSize: 16384, covered: legacyCovered, tornOK: true},
	{name: "zip", pageSize: 8192, zip: true, covered: zipCovered, tornOK: true},
	{name: "pcomp_legacy", pageSize: 16384, pcomp: true, covered: pcompLegacyCovered},
	{name: "enc_legacy", pageSize: 16384, crypt: true, covered: encLegacyCovered, tornOK: true},
	{name: "pcomp_enc_legacy", pageSize: 16384, pcomp: true, crypt: true, covered: pcompEncLegacyCovered},
	// MySQL 8.0.31, one innodb_checksum_algorithm per table (crc32, innodb, none).
	{name: "mysql_crc32", pageSize: 16384, covered: legacyCovered, tornOK: true, mysql: true},
	{name: "mysql_innodb", pageSize: 16384, covered: legacyCovered, tornOK: true, mysql: true},
	{name: "mysql_none", pageSize: 16384, covered: noneCovered, tornOK: true, mysql: true},
	{name: "mysql_zip8", pageSize: 8192, zip: true, covered: zipCovered, tornOK: true, mysql: true},
	{name: "mysql_zip4", pageSize: 4096, zip: true, covered: zipCovered, tornOK: true, mysql: true},
	{name: "mysql_zip8_innodb", pageSize: 8192, zip: true, covered: zipCovered, tornOK: true, mysql: true},
	{name: "mysql_zip8_none", pageSize: 8192, zip: true, covered: zipNoneCovered, mysql: true},
}

// load returns the decompressed contents of testdata/name.
func load(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// pages splits b into pages of size ps.
func pages(t testing.TB, b []byte, ps int) [][]byte {
	t.Helper()
	if len(b) == 0 || len(b)%ps != 0 {
		t.Fatalf("fixture of %d bytes is not a whole number of %d-byte pages", len(b), ps)
	}
	var out [][]byte
	for i := 0; i < len(b); i += ps {
		out = append(out, b[i:i+ps])
	}
	return out
}

// checkerFor parses page 0 of a fixture and returns its pages and checker.
func checkerFor(t testing.TB, name string, ps int, system bool) ([][]byte, *Checker) {
	t.Helper()
	b := load(t, name)
	h, err := ParseSpaceHeader(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return pages(t, b, ps), NewChecker(h, system)
}
