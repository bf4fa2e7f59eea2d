package redo

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMtrPages: leading file-level records name no page, a page record names its
// page, and a same-page record (high bit set after a page record, which reads like a
// file-level type) repeats the page before it; damaged ids are errors, not panics.
func TestMtrPages(t *testing.T) {
	initPage := func(space, page uint32) []byte {
		return record(0x10, append(encVarint(uint64(space)), encVarint(uint64(page))...))
	}
	sameWrite := record(0xB0, []byte{0x05, 0xAA, 0xBB}) // same page, WRITE at +5
	var recs []byte
	for _, r := range [][]byte{fileRecord(recFileModify, 7, "./d/t.ibd"), writeRecord(5, 3, 20), sameWrite,
		writeRecord(5, 9, 4), initPage(6, 200000), sameWrite, initPage(1<<31, 1<<30)} {
		recs = append(recs, r...)
	}
	got, err := mtrPages(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []PageID{{5, 3}, {5, 9}, {6, 200000}, {1 << 31, 1 << 30}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	if got, err := mtrPages(fileRecord(recFileCreate, 9, "./d/n.ibd"), nil); err != nil || len(got) != 0 {
		t.Fatalf("a file-level mini-transaction gave pages %v, %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"no page number":   {0x11, 0x05},
		"bad space varint": {0x12, 0xF8, 0x01},
		"body past end":    {0x35, 0x05, 0x03},
	} {
		if _, err := mtrPages(bad, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestPageSetTakeAndBound: Take returns each page once, by space in page order, and
// starts over; past its bound the set says it lost pages rather than growing.
func TestPageSetTakeAndBound(t *testing.T) {
	s := NewPageSet(4)
	s.Add(PageID{2, 9}, PageID{1, 4}, PageID{2, 1}, PageID{2, 9})
	if n := s.LenWhere(func(space uint32) bool { return space == 2 }); n != 2 {
		t.Fatalf("LenWhere(space 2) = %d, want 2", n)
	}
	pages, ok := s.Take()
	if !ok || !reflect.DeepEqual(pages, map[uint32][]uint32{1: {4}, 2: {1, 9}}) {
		t.Fatalf("Take = %v, %v", pages, ok)
	}
	if s.Len() != 0 {
		t.Fatalf("Len after Take = %d", s.Len())
	}
	s.Add(PageID{1, 1}, PageID{1, 2}, PageID{1, 3}, PageID{1, 4}, PageID{1, 5}, PageID{1, 6})
	if pages, ok := s.Take(); ok || len(pages) != 0 {
		t.Fatalf("over its bound: Take = %v, %v; want nothing and not ok", pages, ok)
	}
	s.Add(PageID{3, 3})
	if pages, ok := s.Take(); !ok || len(pages[3]) != 1 {
		t.Fatalf("after an overflow was taken, the set records again: %v, %v", pages, ok)
	}
}

// TestPagesTrackedMatchPageLSNs checks the page tracking against the server itself:
// while the tailer copies the redo of updates, inserts and a table rebuild, it records
// pages; then SET GLOBAL innodb_log_checkpoint_now=ON makes the (now idle) server write
// every dirty page and a checkpoint at or past the copy's end, and every page on disk
// whose FIL_PAGE_LSN is above the copy's start checkpoint must be in the set.
func TestPagesTrackedMatchPageLSNs(t *testing.T) {
	s := startServer(t, "8M")
	loadSetup(t, s)
	s.exec(t, "CREATE TABLE d.idle (id INT PRIMARY KEY, pad VARCHAR(255)) ENGINE=InnoDB")
	s.exec(t, "INSERT INTO d.idle SELECT seq, REPEAT('z', 200) FROM d.seq_1_to_3000")
	s.exec(t, "SET GLOBAL innodb_log_checkpoint_now=ON")
	pages := NewPageSet(0)
	tl, err := Open(Config{Path: s.logPath(), Out: new(bytes.Buffer), Server: s, Pages: pages, OnFileOp: func(FileOp) {}})
	if err != nil {
		t.Fatal(err)
	}
	start := tl.Start().LSN
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := runTailer(ctx, tl)
	for i := range 6 {
		if err := update(s, i); err != nil {
			t.Fatal(err)
		}
	}
	s.exec(t, "INSERT INTO d.t SELECT seq, REPEAT('n', 100) FROM d.seq_5001_to_7000")
	s.exec(t, "UPDATE d.idle SET pad = 'touched' WHERE id = 1500")
	s.exec(t, "ALTER TABLE d.t ADD COLUMN extra INT NOT NULL DEFAULT 7, FORCE")
	end := stopAtCurrent(ctx, t, s, tl, done)
	s.exec(t, "SET GLOBAL innodb_log_checkpoint_now=ON")
	cp, err := NewestCheckpoint(s.logPath())
	if err != nil {
		t.Fatal(err)
	}
	if cp.LSN < end {
		t.Fatalf("after innodb_log_checkpoint_now the checkpoint is at LSN %d, below the copy's end %d", cp.LSN, end)
	}
	taken, ok := pages.Take()
	if !ok {
		t.Fatal("the page set overflowed")
	}
	changed, missing := 0, []string{}
	for _, f := range []string{"ibdata1", "undo001", "undo002", "undo003", "d/t.ibd", "d/idle.ibd"} {
		for _, p := range pagesAbove(t, filepath.Join(s.Datadir, f), start) {
			changed++
			if !contains(taken[p.Space], p.Page) {
				missing = append(missing, fmt.Sprintf("%s space %d page %d", f, p.Space, p.Page))
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d pages changed since LSN %d are not in the tracked set: %s", len(missing), changed, start, strings.Join(missing[:min(20, len(missing))], "; "))
	}
	if changed < 100 {
		t.Fatalf("only %d pages changed on disk: the workload proves little", changed)
	}
	idle := spaceOf(t, filepath.Join(s.Datadir, "d/idle.ibd"))
	if n := len(taken[idle]); n == 0 || n > 4 {
		t.Errorf("d.idle had one row updated; the set holds %d of its pages", n)
	}
	t.Logf("%d pages changed on disk since LSN %d, all among the %d tracked", changed, start, countPages(taken))
}

// pagesAbove lists the pages of a tablespace file whose FIL_PAGE_LSN exceeds lsn,
// skipping pages whose header names another position (doublewrite copies in ibdata1)
// and files that do not exist (fewer undo tablespaces).
func pagesAbove(t *testing.T, path string, lsn uint64) []PageID {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	const ps = 16384
	var out []PageID
	for i := 0; i+ps <= len(b); i += ps {
		pg := b[i : i+ps]
		no, lsnOnPage, space := binary.BigEndian.Uint32(pg[4:]), binary.BigEndian.Uint64(pg[16:]), binary.BigEndian.Uint32(pg[34:])
		if lsnOnPage > lsn && int(no) == i/ps {
			out = append(out, PageID{space, no})
		}
	}
	return out
}

func spaceOf(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 38 {
		t.Fatalf("read %s: %v", path, err)
	}
	return binary.BigEndian.Uint32(b[34:])
}

func contains(sorted []uint32, v uint32) bool {
	for _, x := range sorted {
		if x == v {
			return true
		}
	}
	return false
}

func countPages(m map[uint32][]uint32) int {
	n := 0
	for _, p := range m {
		n += len(p)
	}
	return n
}
