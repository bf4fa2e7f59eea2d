package apply

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

func readFxFile(t testing.TB, path string) fxFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var fx fxFile
	if err := json.NewDecoder(zr).Decode(&fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

// TestExtendedFixture replays the redo records a real MariaDB 10.11 server wrote
// for pages that received EXTENDED records (captured by TestGenerateExtendedFixture)
// on the page images of the clean shutdown before them, and compares the result
// with the images the server flushed at the next clean shutdown, byte for byte
// except the checksum and LSN fields. WRITE, MEMSET, MEMMOVE and INIT_PAGE are
// applied by a small test-only applier (replayBasic); EXTENDED by applyExtended.
func TestExtendedFixture(t *testing.T) {
	for _, ps := range []string{"16k", "4k", "64k"} {
		t.Run(ps, func(t *testing.T) {
			fx := readFxFile(t, fixturePath(ps))
			seen := map[string]int{}
			compared := map[string]int{}
			for _, pg := range fx.Pages {
				freed, err := replayPage(pg, fx.PageSize, seen)
				if err != nil {
					t.Fatalf("space %d page %d: %v", pg.Space, pg.Page, err)
				}
				if freed {
					continue
				}
				if d := comparePages(pg.Before, pg.After); d >= 0 {
					t.Errorf("space %d page %d (type %d): differs from the server's at byte %d: %#x, server %#x",
						pg.Space, pg.Page, u16(pg.After, offPageTyp), d, pg.Before[d], pg.After[d])
				}
				compared[pageKind(pg.After)]++
			}
			t.Logf("%s (%s): pages compared %v, EXTENDED applied: %v", ps, fx.Server, compared, seen)
			for _, k := range []string{"undo", "redundant index", "compact index"} {
				if compared[k] == 0 {
					t.Errorf("no %s page compared", k)
				}
			}
			for _, sub := range []byte{extInsertHeapRed, extInsertReuseRed, extInsertHeapDyn, extInsertReuseDyn,
				extDeleteRedundant, extDeleteDynamic, extUndoAppend} {
				if seen[extendedName(sub)] == 0 {
					t.Errorf("the fixture has no %s record", extendedName(sub))
				}
			}
			for _, k := range []string{"MIN_REC insert", "INSTANT status insert"} {
				if seen[k] == 0 {
					t.Errorf("the fixture has no %s", k)
				}
			}
			if ps != "64k" && seen["node pointer insert"] == 0 {
				t.Error("the fixture has no insert on a non-leaf page")
			}
			if seen["slot split"] == 0 || seen["slot merge"] == 0 {
				t.Errorf("the fixture splits %d and merges %d directory slots", seen["slot split"], seen["slot merge"])
			}
		})
	}
}

// comparePages returns the first differing byte outside the checksum, FIL_PAGE_LSN
// and the trailer (which the server sets when it writes the page), or -1.
func comparePages(got, want []byte) int {
	for i := range got {
		if i < 4 || i >= 16 && i < 24 || i >= len(got)-8 {
			continue
		}
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

// replayPage applies the groups of pg.Recs at or above the page's FIL_PAGE_LSN to
// pg.Before in place. It reports whether the page ended freed (not written).
func replayPage(pg fxPage, size int, seen map[string]int) (freed bool, err error) {
	f := pg.Before
	pageLSN := binary.BigEndian.Uint64(f[16:])
	last := 0
	for _, r := range pg.Recs {
		if r.LSN < pageLSN {
			continue
		}
		if !r.Same {
			last = 0
		}
		switch r.Type {
		case 0x00: // FREE_PAGE
			freed, last = true, 1
		case 0x10: // INIT_PAGE
			clear(f)
			binary.BigEndian.PutUint32(f[4:], pg.Page)
			copy(f[8:16], bytes.Repeat([]byte{0xFF}, 8))
			binary.BigEndian.PutUint32(f[34:], pg.Space)
			freed, last = false, offPageTyp
		case 0x20:
			slots := u16(f, phNDirSlots)
			if err := applyExtended(f, pg.Page, r.Body); err != nil {
				return false, fmt.Errorf("LSN %d: %w", r.LSN, err)
			}
			seen[extendedName(r.Body[0])]++
			countInsertKinds(r.Body, f, seen)
			if sub := r.Body[0]; sub >= extInsertHeapRed && sub <= extDeleteDynamic {
				switch n := u16(f, phNDirSlots); {
				case n > slots:
					seen["slot split"]++
				case n < slots:
					seen["slot merge"]++
				}
			}
			last = offPageTyp
		case 0x30, 0x40, 0x50:
			if last, err = replayBasic(f, r, last); err != nil {
				return false, fmt.Errorf("LSN %d: %w", r.LSN, err)
			}
		}
	}
	return freed, nil
}

// replayBasic applies a WRITE, MEMSET or MEMMOVE record (log_phys_t::apply) for the
// fixture test; the engine's own implementation is not part of this file.
func replayBasic(f []byte, r fxRec, last int) (int, error) {
	b := r.Body
	off, n := extVarint(b)
	if n > 3 || n >= len(b) {
		return 0, fmt.Errorf("bad offset")
	}
	last += off
	b = b[n:]
	if r.Type == 0x30 {
		if last+len(b) > len(f) {
			return 0, fmt.Errorf("WRITE beyond the page")
		}
		copy(f[last:], b)
		return last + len(b), nil
	}
	l, n := extVarint(b)
	if n > 3 || n > len(b) || last+l > len(f) {
		return 0, fmt.Errorf("bad length")
	}
	b = b[n:]
	if r.Type == 0x40 {
		for i := 0; i < l; i++ {
			f[last+i] = b[i%len(b)]
		}
		return last + l, nil
	}
	s, n := extVarint(b)
	if n != len(b) {
		return 0, fmt.Errorf("bad MEMMOVE source")
	}
	src := last + s>>1 + 1
	if s&1 != 0 {
		src = last - s>>1 - 1
	}
	if src < 8 || src+l > len(f) {
		return 0, fmt.Errorf("MEMMOVE source out of the page")
	}
	copy(f[last:last+l], f[src:src+l])
	return last + l, nil
}

// pageKind names the kind of a page image for coverage messages.
func pageKind(f []byte) string {
	switch {
	case u16(f, offPageTyp) == pageTypeUndo:
		return "undo"
	case u16(f, phNHeap)&0x8000 != 0:
		return "compact index"
	}
	return "redundant index"
}

// countInsertKinds counts inserts of metadata records (instant ALTER TABLE, with the
// MIN_REC flag or the INSTANT status) and of node pointers (non-leaf pages).
func countInsertKinds(payload, f []byte, seen map[string]int) {
	if payload[0] < extInsertHeapRed || payload[0] > extInsertReuseDyn {
		return
	}
	in, err := parseInsert(payload)
	if err != nil {
		return
	}
	if in.enc&1 != 0 {
		seen["MIN_REC insert"]++
	}
	if payload[0] >= extInsertHeapDyn && in.enc&statusInstant != 0 {
		seen["INSTANT status insert"]++
	}
	if u16(f, phLevel) != 0 {
		seen["node pointer insert"]++
	}
}
