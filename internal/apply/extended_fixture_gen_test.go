//go:build e2e

package apply

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/testdb"
)

const fixtureEnv = "FERRY_APPLY_GEN_FIXTURE"

// TestGenerateExtendedFixture captures the fixtures of TestExtendedFixture from a
// private mariadbd. It runs only with FERRY_APPLY_GEN_FIXTURE=1 (testdata/gen.sh): it
// starts servers.
func TestGenerateExtendedFixture(t *testing.T) {
	if os.Getenv(fixtureEnv) != "1" {
		t.Skip("set " + fixtureEnv + "=1 to capture the fixtures from a real server")
	}
	for _, ps := range []string{"16k", "4k", "64k"} {
		t.Run(ps, func(t *testing.T) { generateFixture(t, ps) })
	}
}

var fxTables = []struct{ name, format string }{
	{"t_red", "REDUNDANT"}, {"t_dyn", "DYNAMIC"}, {"t_cmp", "COMPACT"},
}

func generateFixture(t *testing.T, ps string) {
	s := testdb.Start(t, testdb.Options{LogFileSize: "64M", NoBinlog: true,
		Args: []string{"--innodb-page-size=" + ps, "--innodb-undo-tablespaces=0"}})
	s.Exec(t, "CREATE DATABASE fx")
	for _, tb := range fxTables {
		s.Exec(t, "CREATE TABLE fx."+tb.name+" (id INT PRIMARY KEY, k INT, v VARCHAR(300), KEY(k)) ENGINE=InnoDB ROW_FORMAT="+tb.format)
		s.Exec(t, "INSERT INTO fx."+tb.name+" SELECT seq*2, seq%7, REPEAT(CHAR(97+seq%5), seq%40) FROM fx.seq_1_to_400")
	}
	for _, f := range []string{"REDUNDANT", "DYNAMIC"} {
		// Long columns: REDUNDANT keeps a 768-byte prefix and a pointer to the rest
		// (2-byte field offsets with the extern flag), DYNAMIC only the pointer.
		tb := "fx.t_blob_" + f
		s.Exec(t, "CREATE TABLE "+tb+" (id INT PRIMARY KEY, b TEXT) ENGINE=InnoDB ROW_FORMAT="+f)
		s.Exec(t, "INSERT INTO "+tb+" SELECT seq, REPEAT(CHAR(97+seq%7), 200*(seq%20)) FROM fx.seq_1_to_60")
	}
	files := map[uint32]string{0: "ibdata1"}
	rows, err := s.DB(t).Query("SELECT SPACE, NAME FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME LIKE 'fx/%'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uint32
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			t.Fatal(err)
		}
		files[id] = name + ".ibd"
	}
	rows.Close()
	version := s.Version(t)
	s.Exec(t, "SET GLOBAL innodb_fast_shutdown=0")
	s.Stop(t)
	before := readSpaces(t, s.Datadir, files)
	logPath := filepath.Join(s.Datadir, "ib_logfile0")
	cp, err := redo.NewestCheckpoint(logPath)
	if err != nil {
		t.Fatal(err)
	}
	s.Restart(t)
	for _, tb := range fxTables {
		for _, q := range []string{
			"INSERT INTO fx.%s SELECT seq*2+1, seq%11, REPEAT('b', seq%30) FROM fx.seq_1_to_150",
			"DELETE FROM fx.%s WHERE id % 5 = 0 AND id < 400",
			"UPDATE fx.%s SET v = REPEAT('c', 60) WHERE id % 7 = 1",
			"INSERT IGNORE INTO fx.%s SELECT seq*10+3, 1, 'x' FROM fx.seq_1_to_100",
			"UPDATE fx.%s SET v = 'short' WHERE id % 9 = 2",
			"DELETE FROM fx.%s WHERE id > 700",
			"ALTER TABLE fx.%s ADD COLUMN c INT DEFAULT 5, ALGORITHM=INSTANT",
			"INSERT INTO fx.%s (id, k, v, c) SELECT seq*2+3001, seq%3, 'after-instant', seq FROM fx.seq_1_to_50",
			"ALTER TABLE fx.%s ADD COLUMN d INT DEFAULT 1 FIRST, ALGORITHM=INSTANT",
			"ALTER TABLE fx.%s DROP COLUMN c, ALGORITHM=INSTANT",
			"UPDATE fx.%s SET v = 'dropped' WHERE id % 13 = 0",
		} {
			s.Exec(t, sprintfTable(q, tb.name))
		}
	}
	// Let purge remove the deleted records (DELETE_ROW_FORMAT_*), then shut down
	// without the slow shutdown's final purge, which would free the undo pages.
	for _, f := range []string{"REDUNDANT", "DYNAMIC"} {
		tb := "fx.t_blob_" + f
		s.Exec(t, "DELETE FROM "+tb+" WHERE id % 4 = 0")
		s.Exec(t, "UPDATE "+tb+" SET b = REPEAT('q', 100*(id%30)) WHERE id % 3 = 0")
		s.Exec(t, "INSERT INTO "+tb+" SELECT seq*4, REPEAT('r', 150*(seq%25)) FROM fx.seq_1_to_15")
	}
	s.Exec(t, "SET GLOBAL innodb_max_purge_lag_wait=0")
	preparedTrx(t, s)
	s.Exec(t, "SET GLOBAL innodb_fast_shutdown=1")
	s.Stop(t)
	after := readSpaces(t, s.Datadir, files)
	logBytes, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	recs := parseLog(t, logBytes, cp.LSN)
	size, _ := strconv.Atoi(ps[:len(ps)-1])
	fx := fxFile{Server: version, PageSize: size << 10}
	for id, rs := range recs {
		if !hasExtended(rs) || before[id.space] == nil {
			continue
		}
		fx.Pages = append(fx.Pages, fxPage{Space: id.space, Page: id.page,
			Before: pageOf(before[id.space], id.page, fx.PageSize), After: pageOf(after[id.space], id.page, fx.PageSize), Recs: rs})
	}
	sort.Slice(fx.Pages, func(i, j int) bool {
		a, b := fx.Pages[i], fx.Pages[j]
		return a.Space < b.Space || a.Space == b.Space && a.Page < b.Page
	})
	writeFixture(t, fixturePath(ps), fx)
	t.Logf("%s: %d pages with EXTENDED records from checkpoint %d", ps, len(fx.Pages), cp.LSN)
}

// preparedTrx leaves an XA transaction prepared at shutdown, so that its undo log
// pages (UNDO_INIT, UNDO_APPEND) are still in use in the after image.
func preparedTrx(t *testing.T, s *testdb.Server) {
	ctx := context.Background()
	conn, err := s.DB(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"XA START 'fx'",
		"INSERT INTO fx.t_red (id, k, v) SELECT seq*2+2001, 3, REPEAT('p', seq%50) FROM fx.seq_1_to_200",
		"UPDATE fx.t_dyn SET v = REPEAT('u', 70) WHERE id < 200",
		"DELETE FROM fx.t_cmp WHERE id < 100",
		"XA END 'fx'",
		"XA PREPARE 'fx'",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func sprintfTable(q, name string) string {
	return string(bytes.ReplaceAll([]byte(q), []byte("%s"), []byte(name)))
}

func readSpaces(t *testing.T, datadir string, files map[uint32]string) map[uint32][]byte {
	out := map[uint32][]byte{}
	for id, name := range files {
		b, err := os.ReadFile(filepath.Join(datadir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[id] = b
	}
	return out
}

// pageOf returns page n of a file image, zeros beyond its end.
func pageOf(file []byte, n uint32, size int) []byte {
	p := make([]byte, size)
	if off := int(n) * size; off < len(file) {
		copy(p, file[off:])
	}
	return p
}

func hasExtended(rs []fxRec) bool {
	for _, r := range rs {
		if r.Raw[0]&0x70 == recExtended {
			return true
		}
	}
	return false
}

type fxID struct{ space, page uint32 }

// parseLog walks the mini-transactions of a 10.8+ log file from lsn to the first
// invalid one and returns the page records by page.
func parseLog(t *testing.T, file []byte, lsn uint64) map[fxID][]fxRec {
	h, err := redo.ParseHeader(file)
	if err != nil {
		t.Fatal(err)
	}
	capacity := uint64(len(file) - redo.StartOffset)
	at := func(l uint64, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = file[redo.StartOffset+(l+uint64(i)-h.FirstLSN)%capacity]
		}
		return b
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	out := map[fxID][]fxRec{}
	for {
		var m []byte
		for len(m) < 1<<20 {
			head := at(lsn+uint64(len(m)), 4)
			if head[0] <= 1 {
				break
			}
			n := recLen(head)
			if n == 0 {
				return out
			}
			m = append(m, at(lsn+uint64(len(m)), n)...)
		}
		crc := at(lsn+uint64(len(m))+1, 4)
		if len(m) == 0 || crc32.Checksum(m, castagnoli) != binary.BigEndian.Uint32(crc) {
			return out
		}
		splitMtr(m, lsn, out)
		lsn += uint64(len(m)) + 5
	}
}

// recLen is the total length of the record at the start of b, 0 if b is too short.
func recLen(b []byte) int {
	n, _ := redo.RecordLen(b)
	return n
}

// splitMtr adds the page records of one mini-transaction to out.
func splitMtr(m []byte, lsn uint64, out map[fxID][]fxRec) {
	w := recWalker{recs: m}
	for w.next() {
		if !w.file {
			id := fxID{w.id.Space, w.id.Page}
			out[id] = append(out[id], fxRec{LSN: lsn, Raw: append([]byte(nil), w.rec...)})
		}
	}
}

func writeFixture(t *testing.T, path string, fx fxFile) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(fx); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
