package apply

// checkCompactPage is the first group of checks of page_apply_insert_dynamic.
func checkCompactPage(p *extPage, pageNo uint32, in extInsert) (nSlots, h int, err error) {
	nSlots, h = p.u16(phNDirSlots), p.u16(phNHeap)
	switch {
	case nSlots < 2:
		return 0, 0, p.corrupt("PAGE_N_DIR_SLOTS %d", nSlots)
	case h < 0x8002 || h&0x7FFF >= p.size/newExtra || h&0x7FFF < nSlots:
		return 0, 0, p.corrupt("PAGE_N_HEAP %#x with %d slots", h, nSlots)
	}
	if err := checkIndexPage(p, pageNo, compactFmt()); err != nil {
		return 0, 0, err
	}
	if in.enc&statusInstant != 0 && !isLeaf(p) {
		return 0, 0, p.corrupt("instant-ALTER metadata record on a non-leaf page")
	}
	if in.enc>>3 > len(in.lit) {
		return 0, 0, p.corrupt("%d literal header bytes, only %d literal bytes", in.enc>>3, len(in.lit))
	}
	return nSlots, h, nil
}

// isLeaf reports whether PAGE_LEVEL is 0.
func isLeaf(p *extPage) bool { return p.u16(phLevel) == 0 }

// insertDynamic applies INSERT_HEAP_DYNAMIC or INSERT_REUSE_DYNAMIC
// (page_apply_insert_dynamic).
func insertDynamic(p *extPage, pageNo uint32, in extInsert) error {
	rf := compactFmt()
	nSlots, h, err := checkCompactPage(p, pageNo, in)
	if err != nil {
		return err
	}
	var t insertTarget
	if t.heapTop, t.lastSlot, err = checkHeapAndDir(p, rf, nSlots); err != nil {
		return err
	}
	t.prevRec = (rf.infimum + in.prev) & 0xFFFF
	t.nextRec = (t.prevRec + p.u16(t.prevRec-2)) & 0xFFFF
	if in.prev != 0 && (t.prevRec < rf.heapBot+newExtra || t.prevRec > t.heapTop) {
		return p.corrupt("predecessor %d outside the heap", t.prevRec)
	}
	if t.nextRec != rf.supremum && (t.nextRec < rf.heapBot+newExtra || t.nextRec > t.heapTop) {
		return p.corrupt("successor %d outside the heap", t.nextRec)
	}
	if err := findInsertOwner(p, rf, &t); err != nil {
		return err
	}
	hdrL := in.enc >> 3
	extra := newExtra + in.hdrC + hdrL
	dataSize := in.dataC + len(in.lit) - hdrL
	var buf int
	if in.reuse {
		buf, h, err = takeCompactFree(p, &t, in.shift, extra, dataSize)
	} else {
		buf, err = takeHeap(p, &t, extra+dataSize, h, func(n int) { h = n })
	}
	if err != nil {
		return err
	}
	writeCompactRecord(p, &t, in, buf, h)
	lastInsert := p.u16(phLastInsert)
	r := buf + extra
	p.set16(phLastInsert, r)
	p.set16(t.prevRec-2, r-t.prevRec)
	p.move(r, t.prevRec, in.dataC)
	p.write(r+in.dataC, in.lit[hdrL:])
	return finishInsert(p, rf, &t, lastInsert)
}

// takeCompactFree checks the head of the PAGE_FREE list and takes it for a record of
// extra+dataSize bytes whose header starts shift bytes away from where the freed
// record's would (COMPACT). It returns the start of the new header and the freed
// record's heap number.
func takeCompactFree(p *extPage, t *insertTarget, shift, extra, dataSize int) (buf, heapNo int, err error) {
	rf := compactFmt()
	free := p.u16(phFree)
	if free < rf.heapBot+newExtra || free > t.heapTop {
		return 0, 0, p.corrupt("PAGE_FREE %d outside the heap", free)
	}
	buf = free - extra
	if shift&1 != 0 {
		buf -= shift >> 1
	} else {
		buf += shift >> 1
	}
	if buf < rf.heapBot || buf+extra+dataSize > t.heapTop {
		return 0, 0, p.corrupt("record of %d bytes at %d outside the heap", extra+dataSize, buf)
	}
	garbage := p.u16(phGarbage)
	if garbage < extra+dataSize {
		return 0, 0, p.corrupt("PAGE_GARBAGE %d below the record's %d bytes", garbage, extra+dataSize)
	}
	next := p.u16(free - 2)
	if next != 0 {
		next = (next + free) & 0xFFFF
		if next < rf.heapBot+newExtra || next > t.heapTop {
			return 0, 0, p.corrupt("free list leaves the heap at %d", next)
		}
	}
	if err := p.done(); err != nil {
		return 0, 0, err
	}
	p.set16(phFree, next)
	p.set16(phGarbage, garbage-(extra+dataSize))
	return buf, rf.heapNo(p, free), nil
}

// writeCompactRecord writes the header of the new COMPACT record at buf: the literal
// header bytes, the header bytes shared with the predecessor, info bits (n_owned 0),
// heap number and status, and the relative next field pointing to the successor.
func writeCompactRecord(p *extPage, t *insertTarget, in extInsert, buf, h int) {
	hdrL := in.enc >> 3
	p.write(buf, in.lit[:hdrL])
	buf += hdrL
	p.move(buf, t.prevRec-newExtra-in.hdrC, in.hdrC)
	buf += in.hdrC
	status := statusNodePtr
	if isLeaf(p) {
		status = in.enc & statusInstant
	}
	p.set8(buf, (in.enc&3)<<4)
	p.set8(buf+1, h>>5)
	p.set8(buf+2, (h&31)<<3|status)
	r := buf + newExtra
	p.set16(r-2, t.nextRec-r)
}
