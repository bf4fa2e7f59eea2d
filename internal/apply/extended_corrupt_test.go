package apply

import (
	"encoding/binary"
	"testing"
)

// basePage returns a page holding keys 10..60 and 80 (key 70 freed, PAGE_FREE
// points to it), and valid payloads: a heap insert of key 45 (larger than the freed
// record), a reuse insert of key 65 (as large), an insert of key 5 after the
// infimum, and a delete of key 50.
type base struct {
	tp                      *tPage
	heap, reuse, first, del []byte
}

func basePage(t testing.TB, size int, compact bool) base {
	tp := newTPage(t, size, compact)
	for k := 1; k <= 9; k++ {
		tp.insert(k-1, simpleRec(tp.rf, k*10))
	}
	tp.remove(8) // key 90 is on top of the heap: PAGE_FREE stays empty
	tp.remove(6) // key 70 goes to PAGE_FREE
	b := base{tp: tp}
	b.heap = tp.insertPayload(4, dataRec(tp.rf, 45, []byte{0, 45, 'x', 'y', 'y', 'y'}))
	b.reuse = tp.insertPayload(6, simpleRec(tp.rf, 65))
	b.first = tp.insertPayload(0, simpleRec(tp.rf, 5))
	prev := tp.chain()[3]
	if compact {
		b.del = []byte{extDeleteDynamic, byte(prev - newInfimum), 1, 3}
	} else {
		b.del = []byte{extDeleteRedundant, byte(prev - oldInfimum)}
	}
	return b
}

func set16(f []byte, off, v int) { binary.BigEndian.PutUint16(f[off:], uint16(v)) }

// nextOf returns the origin of rec's successor.
func nextOf(f []byte, rf recFmt, rec int) int {
	n := u16(f, rec-2)
	if rf.compact {
		n = (rec + n) & 0xFFFF
	}
	return n
}

// TestCorruptLeavesFrameUnchanged feeds records the server refuses, on pages it
// would call corrupted, and checks each is refused with the frame unchanged,
// including a refusal found only after the first writes (a split walking off the
// record list), which is undone.
func TestCorruptLeavesFrameUnchanged(t *testing.T) {
	cases := []struct {
		name string
		only int // 0 both formats, 1 redundant, 2 dynamic
		mut  func(f []byte, rf recFmt, b base) []byte
		want string // "" = any reason
	}{
		{"page number", 0, func(f []byte, _ recFmt, b base) []byte { f[7]++; return b.heap }, "another page"},
		{"page type", 0, func(f []byte, _ recFmt, b base) []byte { f[25] = 1; return b.heap }, "not an index page"},
		{"supremum next", 0, func(f []byte, rf recFmt, b base) []byte { f[rf.supremum-1] = 1; return b.heap }, "supremum"},
		{"one slot", 0, func(f []byte, _ recFmt, b base) []byte { set16(f, phNDirSlots, 1); return b.heap }, "PAGE_N_DIR_SLOTS"},
		{"many slots", 0, func(f []byte, _ recFmt, b base) []byte { set16(f, phNDirSlots, 4000); return b.heap }, "PAGE_N_HEAP"},
		{"heap top low", 0, func(f []byte, _ recFmt, b base) []byte { set16(f, phHeapTop, 100); return b.heap }, "PAGE_HEAP_TOP"},
		{"heap top in dir", 0, func(f []byte, _ recFmt, b base) []byte { set16(f, phHeapTop, len(f)-11); return b.heap }, "PAGE_HEAP_TOP"},
		{"slot 0", 0, func(f []byte, _ recFmt, b base) []byte { f[len(f)-9]++; return b.heap }, "first directory slot"},
		{"last slot", 0, func(f []byte, _ recFmt, b base) []byte { f[slotAddr(len(f), 2)+1]++; return b.heap }, "last directory slot"},
		{"prev outside", 0, func(f []byte, _ recFmt, b base) []byte { b.heap[1] = 0x7F; return b.heap }, "predecessor"},
		{"literal short", 1, func(_ []byte, _ recFmt, b base) []byte { return b.heap[:len(b.heap)-1] }, "literal bytes"},
		{"literal long", 1, func(_ []byte, _ recFmt, b base) []byte { return append(b.heap, 0) }, "literal bytes"},
		{"instant on non-leaf", 2, func(f []byte, _ recFmt, b base) []byte { f[phLevel+1] = 1; b.heap[2] |= 4; return b.heap }, "instant"},
		{"no free record", 0, func(f []byte, _ recFmt, b base) []byte { set16(f, phFree, 0); return b.reuse }, "PAGE_FREE"},
		{"garbage", 0, func(f []byte, _ recFmt, b base) []byte { set16(f, phGarbage, 3); return b.reuse }, "PAGE_GARBAGE"},
		{"free list", 0, func(f []byte, rf recFmt, b base) []byte {
			free := u16(f, phFree)
			if rf.compact {
				set16(f, free-2, 50-free) // relative: to offset 50
			} else {
				set16(f, free-2, 50)
			}
			return b.reuse
		}, "free list"},
		{"heap full", 0, func(f []byte, _ recFmt, b base) []byte {
			set16(f, phHeapTop, slotAddr(len(f), u16(f, phNDirSlots)-1)-3)
			return b.heap
		}, "does not fit"},
		{"no owner", 0, func(f []byte, rf recFmt, b base) []byte { f[rf.supremum-rf.extra] &= 0xF0; return b.heap }, ""},
		{"split walks off", 0, func(f []byte, rf recFmt, b base) []byte {
			f[rf.supremum-rf.extra] = f[rf.supremum-rf.extra]&0xF0 | 8 // the insert splits
			k50 := nextOf(f, rf, u16(f, slotAddr(len(f), 1)))          // slot 1 points to key 40
			set16(f, k50-2, 0)                                         // the walk from key 40 stops there
			return b.reuse                                             // after key 60: every check passes
		}, "directory split"},
		{"delete no recs", 0, func(f []byte, _ recFmt, b base) []byte { set16(f, phNRecs, 0); return b.del }, "PAGE_N_RECS"},
		{"delete format", 0, func(f []byte, _ recFmt, b base) []byte { f[phNHeap] ^= 0x80; return b.del }, "row format"},
		{"delete prev", 1, func(f []byte, _ recFmt, b base) []byte { return append(b.del[:1], 0xBF, 0xFF) }, "predecessor"},
		{"delete prev", 2, func(f []byte, _ recFmt, b base) []byte { return append(b.del[:1], 0xBF, 0xFF, 1, 3) }, "predecessor"},
		{"delete size", 2, func(f []byte, _ recFmt, b base) []byte { return append(b.del[:1], b.del[1], 1, 0xBF, 0xFF) }, "outside the heap"},
		{"delete no owner", 0, func(f []byte, rf recFmt, b base) []byte { f[rf.supremum-rf.extra] &= 0xF0; return b.del }, ""},
	}
	for _, size := range []int{4096, 16384} {
		bothFormats(t, func(t *testing.T, compact bool) {
			for _, c := range cases {
				if c.only == 1 && compact || c.only == 2 && !compact {
					continue
				}
				b := basePage(t, size, compact)
				for _, p := range []*[]byte{&b.heap, &b.reuse, &b.first, &b.del} {
					*p = append([]byte(nil), *p...)
				}
				p := c.mut(b.tp.f, b.tp.rf, b)
				t.Run(c.name, func(t *testing.T) { expectCorrupt(t, b.tp.f, b.tp.pageNo, p, c.want) })
			}
		})
	}
}

// TestBaseRecordsApply checks that the unmutated payloads of the corruption table
// apply, so each case fails for the reason it names.
func TestBaseRecordsApply(t *testing.T) {
	bothFormats(t, func(t *testing.T, compact bool) {
		for pick := 0; pick < 4; pick++ {
			b := basePage(t, 4096, compact)
			p := [][]byte{b.heap, b.reuse, b.first, b.del}[pick]
			if err := applyExtended(b.tp.f, b.tp.pageNo, p); err != nil {
				t.Fatalf("%x: %v", p, err)
			}
			if pick == 1 && p[0]&1 == 0 {
				t.Fatalf("%x is not a reuse", p)
			}
		}
	})
}

// TestLengthRules checks the record length rules of log_phys_t::apply.
func TestLengthRules(t *testing.T) {
	undo := make([]byte, 4096)
	undoPageInit(undo)
	red := newTPage(t, 4096, false)
	red.insert(0, simpleRec(red.rf, 1))
	dyn := newTPage(t, 4096, true)
	dyn.insert(0, simpleRec(dyn.rf, 1))
	for _, c := range []struct {
		name    string
		f       []byte
		payload []byte
		ok      bool
	}{
		{"empty", undo, nil, false},
		{"init with data", undo, []byte{extInitDynamic, 0}, false},
		{"undo init with data", undo, []byte{extUndoInit, 0}, false},
		{"undo append 2 bytes", undo, []byte{extUndoAppend, 1, 2}, false},
		{"undo append 3 bytes", undo, []byte{extUndoAppend, 1, 2, 3}, true},
		{"insert no fields", red.f, []byte{extInsertHeapRed}, false},
		{"insert prev 4 bytes", red.f, []byte{extInsertHeapRed, 0xE0, 0, 0, 0, 0, 0, 0, 0}, false},
		{"insert ends after hdr_c", red.f, []byte{extInsertHeapRed, 0, 8, 0}, false},
		{"insert enc_hdr 3 bytes", red.f, []byte{extInsertHeapRed, 0, 0xC0, 0, 0, 0, 0, 1}, false},
		{"insert data_c 3 bytes (redundant)", red.f, []byte{extInsertHeapRed, 0, 8, 0, 0xC0, 0, 0}, false},
		{"dynamic hdr_c 3 bytes", dyn.f, []byte{extInsertHeapDyn, 0, 8, 0xC0, 0, 0, 0, 1}, false},
		{"dynamic reuse without shift room", dyn.f, []byte{extInsertReuseDyn, 0, 0}, false},
		{"delete redundant no prev", red.f, []byte{extDeleteRedundant}, false},
		{"delete redundant 4 bytes", red.f, []byte{extDeleteRedundant, 0, 0, 0, 0}, false},
		{"delete redundant trailing byte", red.f, []byte{extDeleteRedundant, 0, 0}, false},
		{"delete redundant cut varint", red.f, []byte{extDeleteRedundant, 0x80}, false},
		{"delete redundant", red.f, []byte{extDeleteRedundant, 0}, true},
		{"delete dynamic no data_size", dyn.f, []byte{extDeleteDynamic, 0, 1}, false},
		{"delete dynamic trailing byte", dyn.f, []byte{extDeleteDynamic, 0, 1, 3, 0}, false},
		{"delete dynamic", dyn.f, []byte{extDeleteDynamic, 0, 1, 3}, true},
		{"trim pages", undo, []byte{extTrimPages}, false},
		{"unknown", undo, []byte{11}, false},
	} {
		f := append([]byte(nil), c.f...)
		pageNo := uint32(7)
		err := applyExtended(f, pageNo, c.payload)
		if (err == nil) != c.ok {
			t.Errorf("%s: %x: error %v, want ok=%v", c.name, c.payload, err, c.ok)
		}
		if err != nil && firstDiff(f, c.f) >= 0 {
			t.Errorf("%s: refused but the frame changed", c.name)
		}
	}
}

// TestBalanceFaultRollsBack deletes a record whose slot then takes a record from the
// next slot, on a page where the slot owner's next field is empty: the server would
// follow a null pointer after the delete's writes; ferry refuses the record and
// undoes them.
func TestBalanceFaultRollsBack(t *testing.T) {
	bothFormats(t, func(t *testing.T, compact bool) {
		tp := newTPage(t, 16384, compact)
		for k := 1; k <= 16; k++ {
			tp.insert(k-1, simpleRec(tp.rf, k*10))
		}
		tp.insert(5, simpleRec(tp.rf, 55)) // slot 2 (key 80) owns 5
		owner := u16(tp.f, slotAddr(len(tp.f), 1))
		if tp.owned(owner) != 4 || tp.owned(u16(tp.f, slotAddr(len(tp.f), 2))) != 5 {
			t.Fatal("unexpected directory")
		}
		set16(tp.f, owner-2, 0)
		p := []byte{extDeleteRedundant, 0}
		if compact {
			p = []byte{extDeleteDynamic, 0, 1, 3}
		}
		expectCorrupt(t, tp.f, tp.pageNo, p, "directory balance")
	})
}
