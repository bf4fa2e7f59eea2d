package apply

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// Test side of the EXTENDED records: a writer that encodes INSERT and DELETE records
// the way mtr_t::page_insert and mtr_t::page_delete do, from a logical model of the
// page, and a checker that validates a page against that model. The writer compares
// against the bytes on the page, as the server's writer compares against cur->rec.

// tRec is one user record of the model.
type tRec struct {
	key    int
	varHdr []byte // variable header part, lowest address first
	info   byte   // info bits (0x10 MIN_REC, 0x20 DELETED)
	data   []byte
	nf     int  // REDUNDANT: number of fields
	short  bool // REDUNDANT: 1-byte field end offsets
}

func (r tRec) extra(rf recFmt) int { return rf.extra + len(r.varHdr) }

// tPage is a page under test and its model.
type tPage struct {
	t      testing.TB
	f      []byte
	pageNo uint32
	rf     recFmt
	recs   []tRec         // user records in key order
	free   map[int][2]int // origin of each freed record -> extra, data size
	lastIn int            // expected PAGE_LAST_INSERT
	stats  map[string]int // counts of operations, to prove coverage
	last   string         // the last operation, for messages
}

func newTPage(t testing.TB, size int, compact bool) *tPage {
	f := make([]byte, size)
	const pageNo = 7
	binary.BigEndian.PutUint32(f[offPageNo:], pageNo)
	binary.BigEndian.PutUint32(f[34:], 5) // space id: left alone by every subtype
	for i := range f[size-8:] {
		f[size-8+i] = 0xEE // trailer: left alone too
	}
	sub := byte(extInitRedundant)
	rf := redundantFmt()
	if compact {
		sub, rf = extInitDynamic, compactFmt()
	}
	if err := applyExtended(f, pageNo, []byte{sub}); err != nil {
		t.Fatal(err)
	}
	return &tPage{t: t, f: f, pageNo: pageNo, rf: rf, free: map[int][2]int{}, stats: map[string]int{}}
}

// encVarint is mlog_encode_varint.
func encVarint(v int) []byte {
	switch {
	case v < 0x80:
		return []byte{byte(v)}
	case v < 0x4080:
		v -= 0x80
		return []byte{0x80 | byte(v>>8), byte(v)}
	case v < 0x204080:
		v -= 0x4080
		return []byte{0xC0 | byte(v>>16), byte(v >> 8), byte(v)}
	}
	panic("varint too large for a test")
}

func u16(f []byte, off int) int { return int(binary.BigEndian.Uint16(f[off:])) }

// chain walks the record list from the infimum and returns the user record origins.
func (tp *tPage) chain() []int {
	var out []int
	rec := tp.rf.infimum
	for i := 0; i < len(tp.f); i++ {
		n := u16(tp.f, rec-2)
		if tp.rf.compact {
			n = (rec + n) & 0xFFFF
		}
		if n == tp.rf.supremum {
			return out
		}
		if n <= 0 || n >= len(tp.f) {
			tp.t.Fatalf("record %d: next %d off the page", rec, n)
		}
		out = append(out, n)
		rec = n
	}
	tp.t.Fatal("record list has a cycle")
	return nil
}

// prevOf returns the origin and model record of the predecessor of position i.
func (tp *tPage) prevOf(i int) (int, []byte, []byte) {
	if i == 0 {
		return tp.rf.infimum, nil, []byte("infimum\x00")
	}
	off := tp.chain()[i-1]
	r := tp.recs[i-1]
	return off, r.varHdr, r.data
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// insertPayload encodes an INSERT record putting r at position i.
func (tp *tPage) insertPayload(i int, r tRec) []byte {
	prevOff, prevHdr, prevData := tp.prevOf(i)
	hdrC := commonSuffix(r.varHdr, prevHdr)
	dataC := commonPrefix(r.data, prevData)
	size := r.extra(tp.rf) + len(r.data)
	free := u16(tp.f, phFree)
	reuse := free != 0 && tp.free[free][0]+tp.free[free][1] >= size
	var p []byte
	if !tp.rf.compact {
		sub := byte(extInsertHeapRed)
		if reuse {
			sub = extInsertReuseRed
		}
		short := 0
		if r.short {
			short = 1
		}
		p = append([]byte{sub}, encVarint(prevOff-oldInfimum)...)
		p = append(p, encVarint((r.nf-1)<<3|short<<2|int(r.info>>4))...)
	} else {
		sub := byte(extInsertHeapDyn)
		if reuse {
			sub = extInsertReuseDyn
		}
		p = append([]byte{sub}, encVarint(prevOff-newInfimum)...)
		if reuse {
			x := r.extra(tp.rf) - tp.free[free][0]
			s := x << 1
			if x < 0 {
				s = -x<<1 | 1
			}
			p = append(p, encVarint(s)...)
		}
		p = append(p, encVarint((len(r.varHdr)-hdrC)<<3|int(r.info>>4))...)
	}
	p = append(p, encVarint(hdrC)...)
	p = append(p, encVarint(dataC)...)
	p = append(p, r.varHdr[:len(r.varHdr)-hdrC]...)
	p = append(p, r.data[dataC:]...)
	if reuse {
		tp.stats["reuse"]++
	} else {
		tp.stats["heap"]++
	}
	if hdrC > 0 {
		tp.stats["hdr_c"]++
	}
	if dataC > 0 {
		tp.stats["data_c"]++
	}
	if dataC == len(r.data) && hdrC == len(r.varHdr) {
		tp.stats["no literal"]++
	}
	return p
}

// insert applies an INSERT of r at position i and updates the model.
func (tp *tPage) insert(i int, r tRec) {
	tp.t.Helper()
	free := u16(tp.f, phFree)
	top := u16(tp.f, phHeapTop)
	p := tp.insertPayload(i, r)
	slots := u16(tp.f, phNDirSlots)
	tp.last = fmt.Sprintf("%s %x at heap top %d", extendedName(p[0]), p, top)
	if err := applyExtended(tp.f, tp.pageNo, p); err != nil {
		tp.t.Fatalf("insert key %d at %d: %v", r.key, i, err)
	}
	origin := top + r.extra(tp.rf)
	if p[0]&1 != 0 {
		origin = free - tp.free[free][0] + r.extra(tp.rf)
		delete(tp.free, free)
	}
	tp.recs = append(tp.recs, tRec{})
	copy(tp.recs[i+1:], tp.recs[i:])
	tp.recs[i] = r
	tp.lastIn = origin
	if u16(tp.f, phNDirSlots) > slots {
		tp.stats["split"]++
	}
	tp.check()
}

// remove applies a DELETE of the record at position i and updates the model.
func (tp *tPage) remove(i int) {
	tp.t.Helper()
	prevOff, _, _ := tp.prevOf(i)
	rec := tp.chain()[i]
	r := tp.recs[i]
	var p []byte
	if tp.rf.compact {
		p = append([]byte{extDeleteDynamic}, encVarint(prevOff-newInfimum)...)
		p = append(p, encVarint(len(r.varHdr))...)
		p = append(p, encVarint(len(r.data))...)
	} else {
		p = append([]byte{extDeleteRedundant}, encVarint(prevOff-oldInfimum)...)
	}
	slots, garbage := u16(tp.f, phNDirSlots), u16(tp.f, phGarbage)
	tp.last = fmt.Sprintf("%s %x of record %d", extendedName(p[0]), p, rec)
	if err := applyExtended(tp.f, tp.pageNo, p); err != nil {
		tp.t.Fatalf("delete key %d at %d: %v", r.key, i, err)
	}
	switch {
	case u16(tp.f, phFree) == rec:
		tp.free[rec] = [2]int{r.extra(tp.rf), len(r.data)}
		tp.stats["delete to free list"]++
	case u16(tp.f, phGarbage) < garbage:
		tp.stats["delete top with garbage above"]++
	default:
		tp.stats["delete top"]++
	}
	tp.recs = append(tp.recs[:i], tp.recs[i+1:]...)
	tp.lastIn = 0
	if u16(tp.f, phNDirSlots) < slots {
		tp.stats["merge"]++
	}
	tp.check()
}

// check validates the page against the model: record list, record bytes, directory,
// heap numbers, free list and header counters.
func (tp *tPage) check() {
	tp.t.Helper()
	if err := tp.validate(); err != nil {
		tp.t.Fatalf("%v (after %s; PAGE_HEAP_TOP %d, %d slots)", err, tp.last, u16(tp.f, phHeapTop), u16(tp.f, phNDirSlots))
	}
}

func (tp *tPage) validate() error {
	f, rf := tp.f, tp.rf
	offs := tp.chain()
	if len(offs) != len(tp.recs) {
		return fmt.Errorf("%d records in the list, model has %d", len(offs), len(tp.recs))
	}
	if n := u16(f, phNRecs); n != len(offs) {
		return fmt.Errorf("PAGE_N_RECS %d, %d records", n, len(offs))
	}
	if li := u16(f, phLastInsert); li != tp.lastIn {
		return fmt.Errorf("PAGE_LAST_INSERT %d, want %d", li, tp.lastIn)
	}
	live := 0
	heapNos := map[int]bool{}
	for i, off := range offs {
		if err := tp.checkRecord(off, tp.recs[i]); err != nil {
			return fmt.Errorf("record %d (key %d) at %d: %w", i, tp.recs[i].key, off, err)
		}
		live += tp.recs[i].extra(rf) + len(tp.recs[i].data)
		heapNos[rf.heapNo(newExtPage(f), off)] = true
	}
	if err := tp.checkFree(heapNos); err != nil {
		return err
	}
	nHeap := u16(f, phNHeap) & 0x7FFF
	if len(heapNos) != nHeap-2 {
		return fmt.Errorf("PAGE_N_HEAP %d, %d distinct heap numbers in use", nHeap, len(heapNos))
	}
	for h := range heapNos {
		if h < 2 || h >= nHeap {
			return fmt.Errorf("heap number %d outside [2, %d)", h, nHeap)
		}
	}
	if used := u16(f, phHeapTop) - rf.heapBot - u16(f, phGarbage); used != live {
		return fmt.Errorf("PAGE_HEAP_TOP - PAGE_GARBAGE leaves %d bytes, records use %d", used, live)
	}
	return tp.checkDir(offs)
}

// checkRecord compares the bytes of the record at off with the model.
func (tp *tPage) checkRecord(off int, r tRec) error {
	f := tp.f
	if !bytes.Equal(f[off:off+len(r.data)], r.data) {
		return fmt.Errorf("data %x, want %x", f[off:off+len(r.data)], r.data)
	}
	hdr := f[off-r.extra(tp.rf) : off-tp.rf.extra]
	if !bytes.Equal(hdr, r.varHdr) {
		return fmt.Errorf("variable header %x, want %x", hdr, r.varHdr)
	}
	if info := f[off-tp.rf.extra] & 0xF0; info != r.info {
		return fmt.Errorf("info bits %#x, want %#x", info, r.info)
	}
	if tp.rf.compact {
		if st := f[off-3] & 7; st != 0 {
			return fmt.Errorf("status %d on a leaf page", st)
		}
		return nil
	}
	n, short := oldFields(newExtPage(f), off)
	if n != r.nf || short != r.short {
		return fmt.Errorf("%d fields short=%v, want %d %v", n, short, r.nf, r.short)
	}
	return nil
}

// checkFree walks PAGE_FREE and checks it against the model's freed records.
func (tp *tPage) checkFree(heapNos map[int]bool) error {
	f, rf := tp.f, tp.rf
	n := 0
	for off := u16(f, phFree); off != 0; n++ {
		sz, ok := tp.free[off]
		if !ok || n > len(tp.free) {
			return fmt.Errorf("free list reaches %d, not a freed record", off)
		}
		if !allZero(f[off : off+sz[1]]) {
			return fmt.Errorf("freed record %d keeps data bytes", off)
		}
		h := rf.heapNo(newExtPage(f), off)
		if heapNos[h] {
			return fmt.Errorf("heap number %d used twice", h)
		}
		heapNos[h] = true
		next := u16(f, off-2)
		if rf.compact && next != 0 {
			next = (off + next) & 0xFFFF
		}
		off = next
	}
	if n != len(tp.free) {
		return fmt.Errorf("free list has %d records, model %d", n, len(tp.free))
	}
	return nil
}

// checkDir checks the page directory: slot 0 the infimum owning 1, the last slot the
// supremum, every slot's record owning the records since the previous slot, middle
// slots owning 4 to 8, and nothing else owning any.
func (tp *tPage) checkDir(offs []int) error {
	f, rf := tp.f, tp.rf
	ns := u16(f, phNDirSlots)
	slot := func(i int) int { return u16(f, slotAddr(len(f), i)) }
	if slot(0) != rf.infimum || slot(ns-1) != rf.supremum {
		return fmt.Errorf("slots 0 and %d point to %d and %d", ns-1, slot(0), slot(ns-1))
	}
	if o := rf.owned(newExtPage(f), rf.infimum); o != 1 {
		return fmt.Errorf("infimum owns %d", o)
	}
	all := append(offs, rf.supremum)
	s, count := 1, 0
	for _, off := range all {
		count++
		o := rf.owned(newExtPage(f), off)
		if o == 0 {
			continue
		}
		if s >= ns || slot(s) != off {
			return fmt.Errorf("record %d owns %d but slot %d points to %d", off, o, s, slot(s))
		}
		if o != count {
			return fmt.Errorf("slot %d owns %d, has %d records", s, o, count)
		}
		if o > slotMaxOwned || (s != ns-1 && o < slotMinOwned) {
			return fmt.Errorf("slot %d of %d owns %d", s, ns, o)
		}
		s, count = s+1, 0
	}
	if s != ns {
		return fmt.Errorf("%d slots used, PAGE_N_DIR_SLOTS %d", s, ns)
	}
	if below := slotAddr(len(f), ns); u16(f, phHeapTop) <= below && u16(f, below) != 0 {
		return fmt.Errorf("bytes below the last slot not zero")
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
