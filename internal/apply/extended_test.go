package apply

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"strings"
	"testing"
)

// genRec makes a record for key k whose bytes share prefixes (data) and suffixes
// (variable header) with its neighbours, so that hdr_c and data_c are exercised.
func genRec(rng *rand.Rand, rf recFmt, k int) tRec {
	data := []byte{byte(k >> 8), byte(k), 'r', 'o', 'w'}
	data = append(data, bytes.Repeat([]byte{byte('a' + k%3)}, rng.Intn(40))...)
	if rng.Intn(8) == 0 {
		data = append(data, make([]byte, 150)...) // long: 2-byte offsets
	}
	if rng.Intn(10) == 0 {
		data = data[:2+rng.Intn(3)] // short records (the heap-top delete "savings" case)
	}
	var info byte
	if rng.Intn(10) == 0 {
		info = 0x20
	}
	if rf.compact {
		var hdr []byte
		for i := rng.Intn(4); i > 0; i-- {
			hdr = append(hdr, byte(rng.Intn(3)))
		}
		return tRec{key: k, varHdr: hdr, info: info, data: data}
	}
	nf := 1 + rng.Intn(4)
	if nf > len(data) {
		nf = len(data)
	}
	short := len(data) <= 127
	ends := make([]int, nf)
	for i := range ends {
		ends[i] = len(data) * (i + 1) / nf
	}
	var hdr []byte
	for i := nf - 1; i >= 0; i-- {
		if short {
			hdr = append(hdr, byte(ends[i]))
		} else {
			hdr = append(hdr, byte(ends[i]>>8), byte(ends[i]))
		}
	}
	return tRec{key: k, varHdr: hdr, info: info, data: data, nf: nf, short: short}
}

// position returns where key k goes in the model.
func (tp *tPage) position(k int) int {
	i := 0
	for i < len(tp.recs) && tp.recs[i].key < k {
		i++
	}
	return i
}

// fits reports whether a record of n bytes plus a possible new slot fits the heap.
func (tp *tPage) fits(n int) bool {
	last := slotAddr(len(tp.f), u16(tp.f, phNDirSlots)-1)
	return u16(tp.f, phHeapTop)+n+2 <= last
}

// TestInsertDeleteModel runs random inserts and deletes on pages of both formats and
// three sizes, checking after every record that the page matches the model: record
// list in key order, record bytes, directory (splits at 9, balance/merge below 4),
// heap numbers, PAGE_FREE list, PAGE_GARBAGE, PAGE_N_RECS, PAGE_LAST_INSERT.
func TestInsertDeleteModel(t *testing.T) {
	garbageAbove := 0 // deletes of the top record with a gap above it (GARBAGE shrinks)
	defer func() {
		if garbageAbove == 0 {
			t.Error("no delete of a top record with garbage above it")
		}
	}()
	for _, size := range []int{4096, 16384, 65536} {
		for _, compact := range []bool{false, true} {
			name := "redundant"
			if compact {
				name = "dynamic"
			}
			t.Run(name+"/"+itoa(size), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(size) + 1))
				tp := newTPage(t, size, compact)
				used := map[int]bool{}
				for step := 0; step < 2000; step++ {
					pDel := 1 // growing phase: 1 in 10 operations deletes
					if step/500%2 == 1 {
						pDel = 7 // shrinking phase
					}
					if len(tp.recs) > 0 && rng.Intn(10) < pDel {
						i := rng.Intn(len(tp.recs))
						delete(used, tp.recs[i].key)
						tp.remove(i)
						continue
					}
					k := rng.Intn(5000)
					if used[k] {
						continue
					}
					r := genRec(rng, tp.rf, k)
					if !tp.fits(r.extra(tp.rf) + len(r.data)) {
						continue
					}
					used[k] = true
					tp.insert(tp.position(k), r)
				}
				for _, s := range []string{"reuse", "heap", "hdr_c", "data_c", "delete top", "delete to free list", "split", "merge"} {
					if tp.stats[s] == 0 {
						t.Errorf("no %s case exercised: %v", s, tp.stats)
					}
				}
				t.Logf("%v, %d slots at the end", tp.stats, u16(tp.f, phNDirSlots))
				garbageAbove += tp.stats["delete top with garbage above"]
			})
		}
	}
}

func itoa(n int) string {
	b := []byte{}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestInitRowFormat checks page_create_low byte for byte: what it writes, what it
// zeroes and what it leaves alone.
func TestInitRowFormat(t *testing.T) {
	for _, c := range []struct {
		sub                 byte
		nHeap, top, inf, sp int
		tmpl                string
	}{
		{extInitRedundant, 2, 125, 101, 116, emptyRedundant},
		{extInitDynamic, 0x8002, 120, 99, 112, emptyCompact},
	} {
		f := bytes.Repeat([]byte{0xA5}, 8192)
		binary.BigEndian.PutUint32(f[offPageNo:], 9)
		orig := append([]byte(nil), f...)
		if err := applyExtended(f, 9, []byte{c.sub}); err != nil {
			t.Fatal(err)
		}
		want := append([]byte(nil), orig...)
		want[24], want[25] = 0x45, 0xBF
		clear(want[38:64])
		want[39] = 2
		want[51] = 5
		binary.BigEndian.PutUint16(want[40:], uint16(c.top))
		binary.BigEndian.PutUint16(want[42:], uint16(c.nHeap))
		copy(want[94:], c.tmpl)
		clear(want[c.top : 8192-8])
		binary.BigEndian.PutUint16(want[8192-12:], uint16(c.sp))
		binary.BigEndian.PutUint16(want[8192-10:], uint16(c.inf))
		if !bytes.Equal(f, want) {
			t.Errorf("%s: first difference at %d", extendedName(c.sub), firstDiff(f, want))
		}
		if 94+len(c.tmpl) != c.top {
			t.Errorf("template of %d bytes ends at %d, heap top %d", len(c.tmpl), 94+len(c.tmpl), c.top)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestUndoInitAppend checks trx_undo_page_init and UNDO_APPEND byte for byte.
func TestUndoInitAppend(t *testing.T) {
	f := bytes.Repeat([]byte{0x5A}, 4096)
	orig := append([]byte(nil), f...)
	if err := applyExtended(f, 3, []byte{extUndoInit}); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), orig...)
	want[24], want[25] = 0, 2
	copy(want[38:56], []byte{0, 0, 0, 56, 0, 56, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0})
	clear(want[86 : 4096-8])
	if !bytes.Equal(f, want) {
		t.Fatalf("UNDO_INIT: first difference at %d", firstDiff(f, want))
	}
	rec := []byte{1, 2, 3, 4, 5}
	if err := applyExtended(f, 3, append([]byte{extUndoAppend}, rec...)); err != nil {
		t.Fatal(err)
	}
	copy(want[42:], []byte{0, 65})
	copy(want[56:], []byte{0, 65, 1, 2, 3, 4, 5, 0, 56})
	if !bytes.Equal(f, want) {
		t.Fatalf("UNDO_APPEND: first difference at %d", firstDiff(f, want))
	}
	// The last record that fits: free + n + 6 < size - 8.
	binary.BigEndian.PutUint16(f[42:], 4096-8-6-100-1)
	if err := applyExtended(f, 3, append([]byte{extUndoAppend}, make([]byte, 100)...)); err != nil {
		t.Fatalf("record ending 2 bytes before the trailer: %v", err)
	}
	binary.BigEndian.PutUint16(f[42:], 4096-8-6-100)
	expectCorrupt(t, f, 3, append([]byte{extUndoAppend}, make([]byte, 100)...), "TRX_UNDO_PAGE_FREE")
	binary.BigEndian.PutUint16(f[42:], 55)
	expectCorrupt(t, f, 3, append([]byte{extUndoAppend}, 1, 2, 3), "TRX_UNDO_PAGE_FREE")
}

// expectCorrupt applies a payload that must be refused and checks the frame is unchanged.
func expectCorrupt(t *testing.T, f []byte, pageNo uint32, payload []byte, want string) {
	t.Helper()
	orig := append([]byte(nil), f...)
	err := applyExtended(f, pageNo, payload)
	if err == nil {
		t.Fatalf("payload %x accepted, want an error about %q", payload, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
	if d := firstDiff(f, orig); d >= 0 {
		t.Fatalf("%v: frame changed at byte %d", err, d)
	}
}

func TestExtendedName(t *testing.T) {
	for sub, want := range map[byte]string{
		0: "INIT_ROW_FORMAT_REDUNDANT", 1: "INIT_ROW_FORMAT_DYNAMIC", 2: "UNDO_INIT",
		3: "UNDO_APPEND", 4: "INSERT_HEAP_REDUNDANT", 5: "INSERT_REUSE_REDUNDANT",
		6: "INSERT_HEAP_DYNAMIC", 7: "INSERT_REUSE_DYNAMIC", 8: "DELETE_ROW_FORMAT_REDUNDANT",
		9: "DELETE_ROW_FORMAT_DYNAMIC", 10: "TRIM_PAGES", 11: "EXTENDED(11)", 255: "EXTENDED(255)",
	} {
		if got := extendedName(sub); got != want {
			t.Errorf("extendedName(%d) = %q, want %q", sub, got, want)
		}
	}
}
