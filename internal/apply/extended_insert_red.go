package apply

// oldDataSize is rec_get_data_size_old: the end offset of the last field, read from
// the field-end array of a ROW_FORMAT=REDUNDANT header.
func oldDataSize(p *extPage, rec, nFields int, short bool) int {
	switch {
	case nFields == 0:
		return 0
	case short:
		return p.u8(rec-oldExtra-nFields) & 0x7F
	}
	return p.u16(rec-oldExtra-2*nFields) & 0x3FFF
}

// oldFields returns the field count and 1-byte-offsets flag of a REDUNDANT record.
func oldFields(p *extPage, rec int) (n int, short bool) {
	return (p.u16(rec-4) & 0x7FE) >> 1, p.u8(rec-3)&1 != 0
}

// oldExtraSize is the header size of a REDUNDANT record with n fields.
func oldExtraSize(n int, short bool) int {
	if short {
		return oldExtra + n
	}
	return oldExtra + 2*n
}

// checkRedundantPage is the first group of checks of page_apply_insert_redundant.
func checkRedundantPage(p *extPage, pageNo uint32) (nSlots, h int, err error) {
	nSlots, h = p.u16(phNDirSlots), p.u16(phNHeap)
	switch {
	case nSlots < 2:
		return 0, 0, p.corrupt("PAGE_N_DIR_SLOTS %d", nSlots)
	case h < nSlots || h < 2 || h >= p.size/oldExtra:
		return 0, 0, p.corrupt("PAGE_N_HEAP %#x with %d slots", h, nSlots)
	}
	return nSlots, h, checkIndexPage(p, pageNo, redundantFmt())
}

// checkIndexPage checks the page type, the page number and the supremum's next field.
func checkIndexPage(p *extPage, pageNo uint32, rf recFmt) error {
	switch {
	case !indexPageCheck(p):
		return p.corrupt("page type %d is not an index page", p.u16(offPageTyp))
	case !pageNoIs(p, pageNo):
		return p.corrupt("page header names another page")
	case p.u16(rf.supremum-2) != 0:
		return p.corrupt("supremum has a successor")
	}
	return nil
}

// insertRedundant applies INSERT_HEAP_REDUNDANT or INSERT_REUSE_REDUNDANT
// (page_apply_insert_redundant).
func insertRedundant(p *extPage, pageNo uint32, in extInsert) error {
	rf := redundantFmt()
	nSlots, h, err := checkRedundantPage(p, pageNo)
	if err != nil {
		return err
	}
	t := insertTarget{prevRec: rf.infimum + in.prev}
	if t.heapTop, t.lastSlot, err = checkHeapAndDir(p, rf, nSlots); err != nil {
		return err
	}
	if err := checkRedundantPrev(p, &t, in.hdrC); err != nil {
		return err
	}
	hdr, dataSize, err := buildRedundantHeader(p, &t, in)
	if err != nil {
		return err
	}
	var buf int
	if in.reuse {
		buf, err = takeRedundantFree(p, &t, hdr, len(hdr)+dataSize)
	} else {
		buf, err = takeHeap(p, &t, len(hdr)+dataSize, h, func(heapNo int) { setOldHeapNo(hdr, heapNo) })
	}
	if err != nil {
		return err
	}
	lastInsert := p.u16(phLastInsert)
	p.write(buf, hdr)
	r := buf + len(hdr)
	p.set16(phLastInsert, r)
	p.set16(t.prevRec-2, r)
	p.move(r, t.prevRec, in.dataC)
	p.write(r+in.dataC, in.lit[len(hdr)-in.hdrC-oldExtra:])
	return finishInsert(p, rf, &t, lastInsert)
}

// checkRedundantPrev checks the predecessor and its successor (REDUNDANT).
func checkRedundantPrev(p *extPage, t *insertTarget, hdrC int) error {
	rf := redundantFmt()
	prev := t.prevRec
	if prev != rf.infimum && (prev < rf.heapBot+oldExtra+1 || prev > t.heapTop) {
		return p.corrupt("predecessor %d outside the heap", prev)
	}
	n, short := oldFields(p, prev)
	if n == 0 || n > recMaxFields {
		return p.corrupt("predecessor %d has %d fields", prev, n)
	}
	if prev != rf.infimum && prev-oldExtraSize(n, short) < rf.heapBot {
		return p.corrupt("predecessor %d header below the heap", prev)
	}
	if hdrC != 0 && prev-hdrC < rf.heapBot {
		return p.corrupt("%d shared header bytes below the heap", hdrC)
	}
	if prev+oldDataSize(p, prev, n, short) > t.heapTop {
		return p.corrupt("predecessor %d ends above PAGE_HEAP_TOP", prev)
	}
	t.nextRec = p.u16(prev - 2)
	if t.nextRec != rf.supremum && (t.nextRec < rf.heapBot+oldExtra || t.nextRec > t.heapTop) {
		return p.corrupt("successor %d outside the heap", t.nextRec)
	}
	return p.done()
}

// buildRedundantHeader checks the new record's sizes, finds the owner of its slot and
// builds its header: literal bytes, then the bytes shared with the predecessor
// (including its next field, so the new record points to the successor), with info
// bits, 1-byte-offsets flag, field count and n_owned set. It returns the header and
// the data size.
func buildRedundantHeader(p *extPage, t *insertTarget, in extInsert) ([]byte, int, error) {
	short := in.enc>>2&1 != 0
	n := in.enc>>3 + 1
	if n > recMaxFields {
		return nil, 0, p.corrupt("%d fields", n)
	}
	extra := oldExtraSize(n, short)
	hc := in.hdrC + oldExtra
	if hc > extra {
		return nil, 0, p.corrupt("%d shared header bytes in a %d-byte header", hc, extra)
	}
	if extra-hc > len(in.lit) {
		return nil, 0, p.corrupt("%d literal bytes, header needs %d", len(in.lit), extra-hc)
	}
	if err := findInsertOwner(p, redundantFmt(), t); err != nil {
		return nil, 0, err
	}
	hdr := make([]byte, extra)
	copy(hdr, in.lit[:extra-hc])
	if !p.in(t.prevRec-hc, hc) {
		return nil, 0, p.done()
	}
	copy(hdr[extra-hc:], p.f[t.prevRec-hc:t.prevRec])
	hdr[extra-6] = hdr[extra-6]&0x0F | byte(in.enc&3)<<4
	hdr[extra-6] &= 0xF0
	nf := (int(hdr[extra-4])<<8 | int(hdr[extra-3])) &^ 0x7FE
	nf |= n << 1
	hdr[extra-4], hdr[extra-3] = byte(nf>>8), byte(nf)
	hdr[extra-3] = hdr[extra-3]&^1 | byte(in.enc>>2&1)
	var dataSize int
	if short {
		dataSize = int(hdr[0] & 0x7F)
	} else {
		dataSize = (int(hdr[0])<<8 | int(hdr[1])) & 0x3FFF
	}
	if in.dataC > dataSize {
		return nil, 0, p.corrupt("%d shared data bytes in a %d-byte record", in.dataC, dataSize)
	}
	if extra-hc+dataSize-in.dataC != len(in.lit) {
		return nil, 0, p.corrupt("%d literal bytes, record needs %d", len(in.lit), extra-hc+dataSize-in.dataC)
	}
	return hdr, dataSize, nil
}

// setOldHeapNo stores heap number h in a REDUNDANT header (bits 15..3 of the 16-bit
// field 5 bytes before the origin), truncated to 16 bits as the server writes it.
func setOldHeapNo(hdr []byte, h int) {
	e := len(hdr)
	v := (int(hdr[e-5])<<8|int(hdr[e-4]))&7 | h<<3
	hdr[e-5], hdr[e-4] = byte(v>>8), byte(v)
}

// takeRedundantFree checks the head of the PAGE_FREE list and takes it for a record
// of need bytes (REDUNDANT): the new header starts where the freed one did.
func takeRedundantFree(p *extPage, t *insertTarget, hdr []byte, need int) (int, error) {
	rf := redundantFmt()
	free := p.u16(phFree)
	if free < rf.heapBot+oldExtra || free > t.heapTop {
		return 0, p.corrupt("PAGE_FREE %d outside the heap", free)
	}
	n, short := oldFields(p, free)
	fextra := oldExtraSize(n, short)
	if free-fextra < rf.heapBot {
		return 0, p.corrupt("free record %d header below the heap", free)
	}
	fsize := fextra + oldDataSize(p, free, n, short)
	if free+fsize-fextra > t.heapTop {
		return 0, p.corrupt("free record %d ends above PAGE_HEAP_TOP", free)
	}
	if need > fsize {
		return 0, p.corrupt("record of %d bytes does not fit the %d-byte free record", need, fsize)
	}
	garbage := p.u16(phGarbage)
	if garbage < fsize {
		return 0, p.corrupt("PAGE_GARBAGE %d below the free record's %d bytes", garbage, fsize)
	}
	nextFree := p.u16(free - 2)
	if nextFree != 0 && (nextFree < rf.heapBot+oldExtra+1 || nextFree > t.heapTop) {
		return 0, p.corrupt("free list leaves the heap at %d", nextFree)
	}
	if err := p.done(); err != nil {
		return 0, err
	}
	p.set16(phGarbage, garbage-need)
	setOldHeapNo(hdr, rf.heapNo(p, free))
	p.set16(phFree, nextFree)
	return free - fextra, nil
}

// takeHeap allocates need bytes at PAGE_HEAP_TOP (both formats): the record gets heap
// number h&0x7FFF, PAGE_N_HEAP grows by one (keeping the compact flag).
func takeHeap(p *extPage, t *insertTarget, need, h int, setHeapNo func(int)) (int, error) {
	if t.heapTop+need > t.lastSlot {
		return 0, p.corrupt("record of %d bytes does not fit above PAGE_HEAP_TOP %d", need, t.heapTop)
	}
	setHeapNo(h & 0x7FFF)
	p.set16(phNHeap, h+1)
	p.set16(phHeapTop, t.heapTop+need)
	return t.heapTop, nil
}
