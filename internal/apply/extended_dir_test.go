package apply

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ferry-backup/ferry/internal/redo"
)

// simpleRec is a small record for key k (3 data bytes, shared variable header).
func simpleRec(rf recFmt, k int) tRec { return dataRec(rf, k, []byte{0, byte(k), 'x'}) }

// dataRec is a record of two fields (the first one byte long) holding data.
func dataRec(rf recFmt, k int, data []byte) tRec {
	if rf.compact {
		return tRec{key: k, varHdr: []byte{3}, data: data}
	}
	return tRec{key: k, varHdr: []byte{byte(len(data)), 1}, data: data, nf: 2, short: true}
}

func bothFormats(t *testing.T, run func(t *testing.T, compact bool)) {
	t.Run("redundant", func(t *testing.T) { run(t, false) })
	t.Run("dynamic", func(t *testing.T) { run(t, true) })
}

// slotRecs returns the record each directory slot points to.
func (tp *tPage) slotRecs() []int {
	var out []int
	for i := 0; i < u16(tp.f, phNDirSlots); i++ {
		out = append(out, u16(tp.f, slotAddr(len(tp.f), i)))
	}
	return out
}

func (tp *tPage) owned(off int) int { return tp.rf.owned(newExtPage(tp.f), off) }

// TestSplitAndBalance follows one slot through a split (the 8th insert makes the
// supremum own 9), a transfer (a delete leaves 3 while the next slot owns 5) and a
// merge (3 left, the next slot owns 4).
func TestSplitAndBalance(t *testing.T) {
	bothFormats(t, func(t *testing.T, compact bool) {
		tp := newTPage(t, 16384, compact)
		for k := 1; k <= 7; k++ {
			tp.insert(k-1, simpleRec(tp.rf, k))
		}
		if n := u16(tp.f, phNDirSlots); n != 2 || tp.owned(tp.rf.supremum) != 8 {
			t.Fatalf("7 records: %d slots, supremum owns %d", n, tp.owned(tp.rf.supremum))
		}
		tp.insert(7, simpleRec(tp.rf, 8))
		c := tp.chain()
		want := []int{tp.rf.infimum, c[3], tp.rf.supremum}
		if got := tp.slotRecs(); !equalInts(got, want) {
			t.Fatalf("after the split: slots %v, want %v", got, want)
		}
		if tp.owned(c[3]) != 4 || tp.owned(tp.rf.supremum) != 5 {
			t.Fatalf("after the split: own %d and %d, want 4 and 5", tp.owned(c[3]), tp.owned(tp.rf.supremum))
		}
		tp.remove(0) // slot 1 keeps 3: the supremum's slot (5) gives one record
		c = tp.chain()
		if got := tp.slotRecs(); !equalInts(got, []int{tp.rf.infimum, c[3], tp.rf.supremum}) {
			t.Fatalf("after the transfer: slots %v", got)
		}
		if tp.owned(c[2]) != 0 || tp.owned(c[3]) != 4 || tp.owned(tp.rf.supremum) != 4 {
			t.Fatalf("after the transfer: own %d %d %d", tp.owned(c[2]), tp.owned(c[3]), tp.owned(tp.rf.supremum))
		}
		old := slotAddr(len(tp.f), 2)
		tp.remove(0) // 3 again, the supremum owns 4: merge
		if got := tp.slotRecs(); !equalInts(got, []int{tp.rf.infimum, tp.rf.supremum}) {
			t.Fatalf("after the merge: slots %v", got)
		}
		if tp.owned(tp.rf.supremum) != 7 || u16(tp.f, old) != 0 {
			t.Fatalf("after the merge: supremum owns %d, old last slot %d", tp.owned(tp.rf.supremum), u16(tp.f, old))
		}
	})
}

// TestDeleteOwner deletes the record a slot points to: the slot moves to its
// predecessor.
func TestDeleteOwner(t *testing.T) {
	bothFormats(t, func(t *testing.T, compact bool) {
		tp := newTPage(t, 8192, compact)
		for k := 1; k <= 16; k++ {
			tp.insert(k-1, simpleRec(tp.rf, k*10))
		}
		tp.insert(5, simpleRec(tp.rf, 55)) // the slot of key 80 owns 5
		c := tp.chain()
		i := indexOf(c, tp.slotRecs()[2])
		if tp.recs[i].key != 80 || tp.owned(c[i]) != 5 {
			t.Fatalf("slot 2: key %d owning %d", tp.recs[i].key, tp.owned(c[i]))
		}
		tp.remove(i)
		if got := tp.slotRecs()[2]; got != c[i-1] || tp.owned(got) != 4 {
			t.Fatalf("slot 2 points to %d owning %d, want the predecessor %d owning 4", got, tp.owned(got), c[i-1])
		}
	})
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDirection checks PAGE_DIRECTION_B and PAGE_N_DIRECTION: ascending inserts go
// RIGHT, descending LEFT, anything else resets; bits above the direction are kept;
// R-tree pages are left alone.
func TestDirection(t *testing.T) {
	bothFormats(t, func(t *testing.T, compact bool) {
		tp := newTPage(t, 16384, compact)
		tp.f[phDirection] |= 0xA8 // PAGE_INSTANT bits share the byte
		step := func(i, k, dir, n int) {
			t.Helper()
			tp.insert(i, simpleRec(tp.rf, k))
			if d, nd := int(tp.f[phDirection]), u16(tp.f, phNDirection); d != 0xA8|dir || nd != n {
				t.Fatalf("after key %d: direction %#x n %d, want %#x %d", k, d, nd, 0xA8|dir, n)
			}
		}
		step(0, 50, dirNoDirection, 0)
		step(1, 60, dirRight, 1)
		step(2, 70, dirRight, 2)
		step(2, 65, dirNoDirection, 0) // before the last insert, but the page goes RIGHT
		step(2, 64, dirLeft, 1)
		step(2, 63, dirLeft, 2)
		step(3, 635, dirNoDirection, 0) // after the last insert, but the page goes LEFT
		step(6, 66, dirNoDirection, 0)
		tp.remove(0) // PAGE_LAST_INSERT := 0
		step(0, 10, dirNoDirection, 0)

		rt := newTPage(t, 16384, compact)
		rt.f[offPageTyp+1] = pageTypeRTree & 0xFF
		rt.f[phDirection], rt.f[phNDirection+1] = 0x03, 9
		rt.insert(0, simpleRec(rt.rf, 1))
		rt.insert(1, simpleRec(rt.rf, 2))
		if rt.f[phDirection] != 3 || u16(rt.f, phNDirection) != 9 {
			t.Fatalf("R-tree page direction changed to %d/%d", rt.f[phDirection], u16(rt.f, phNDirection))
		}
	})
}

// TestInsertAllShared inserts a record whose header and data all equal its
// predecessor's: data_c then ends the record, which 10.11.19 accepts (§12).
func TestInsertAllShared(t *testing.T) {
	bothFormats(t, func(t *testing.T, compact bool) {
		tp := newTPage(t, 16384, compact)
		tp.insert(0, simpleRec(tp.rf, 1))
		dup := simpleRec(tp.rf, 1)
		dup.key = 2
		p := tp.insertPayload(1, dup)
		if _, n := redo.Varint(p[len(p)-1:]); n != 1 || tp.stats["no literal"] != 1 {
			t.Fatalf("payload %x does not end with data_c", p)
		}
		tp.insert(1, dup)
	})
}

// TestHeapNoOnLargePage inserts into a 64 KiB REDUNDANT page whose PAGE_N_HEAP is
// above 8191: the heap number is stored truncated to 16 bits, as the server does.
func TestHeapNoOnLargePage(t *testing.T) {
	tp := newTPage(t, 65536, false)
	binary.BigEndian.PutUint16(tp.f[phNHeap:], 9000)
	r := simpleRec(tp.rf, 1)
	if err := applyExtended(tp.f, tp.pageNo, tp.insertPayload(0, r)); err != nil {
		t.Fatal(err)
	}
	rec := u16(tp.f, phLastInsert)
	if got, want := u16(tp.f, rec-5)>>3, 9000&0x1FFF; got != want {
		t.Fatalf("heap number %d, want %d", got, want)
	}
	if got := u16(tp.f, phNHeap); got != 9001 {
		t.Fatalf("PAGE_N_HEAP %d", got)
	}
	if !bytes.Equal(tp.f[rec:rec+3], r.data) {
		t.Fatal("data not written")
	}
}

// TestPrevWraps checks the 16-bit wrap of the predecessor offset: on compact pages
// the server computes it modulo 65536, so prev+65536 names the same record; on
// REDUNDANT pages it does not wrap and the record is refused.
func TestPrevWraps(t *testing.T) {
	bothFormats(t, func(t *testing.T, compact bool) {
		b := basePage(t, 16384, compact)
		wrapped := func(p []byte) []byte {
			prev, n := redo.Varint(p[1:])
			return append(append([]byte{p[0]}, encVarint(int(prev)+65536)...), p[1+n:]...)
		}
		for _, p := range [][]byte{b.heap, b.del} {
			want := append([]byte(nil), b.tp.f...)
			if err := applyExtended(want, b.tp.pageNo, p); err != nil {
				t.Fatal(err)
			}
			got := append([]byte(nil), b.tp.f...)
			err := applyExtended(got, b.tp.pageNo, wrapped(p))
			switch {
			case !compact && err == nil:
				t.Errorf("%s with prev+65536 applied on a REDUNDANT page", extendedName(p[0]))
			case compact && err != nil:
				t.Errorf("%s with prev+65536: %v", extendedName(p[0]), err)
			case compact && !bytes.Equal(got, want):
				t.Errorf("%s with prev+65536 differs at byte %d", extendedName(p[0]), firstDiff(got, want))
			}
		}
	})
}
