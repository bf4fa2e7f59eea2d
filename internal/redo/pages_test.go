package redo

import (
	"encoding/binary"
	"os"
	"reflect"
	"testing"
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
