package apply

// recFmt is what differs between the two record formats of index pages.
type recFmt struct {
	compact  bool
	infimum  int // origin of the infimum record
	supremum int // origin of the supremum record
	heapBot  int // end of the supremum: first byte of the record heap
	extra    int // fixed header bytes before each record origin
}

// redundantFmt is the ROW_FORMAT=REDUNDANT record format.
func redundantFmt() recFmt {
	return recFmt{false, oldInfimum, oldSupremum, oldSupremumEnd, oldExtra}
}

// compactFmt is the COMPACT/DYNAMIC record format.
func compactFmt() recFmt { return recFmt{true, newInfimum, newSupremum, newSupremumEnd, newExtra} }

// owned returns the n_owned nibble of the record at rec.
func (rf recFmt) owned(p *extPage, rec int) int { return p.u8(rec-rf.extra) & 0x0F }

// heapNo returns the heap number of the record at rec.
func (rf recFmt) heapNo(p *extPage, rec int) int {
	if rf.compact {
		return p.u16(rec-4) >> 3
	}
	return p.u16(rec-5) >> 3
}

// nextPtr is the successor of rec as rec_get_next_ptr computes it: compact next
// fields are relative (modulo the page size), redundant ones absolute; 0 means none.
func (rf recFmt) nextPtr(p *extPage, rec int) int {
	v := p.u16(rec - 2)
	if v == 0 || !rf.compact {
		return v
	}
	return (rec + v) & (p.size - 1)
}

// walkNext is page_rec_get_next of 10.11: the successor of rec, or 0 when the next
// field is empty or points below the supremum or above PAGE_HEAP_TOP (the server
// would then dereference a null pointer).
func (rf recFmt) walkNext(p *extPage, rec int) int {
	n := rf.nextPtr(p, rec)
	if n < rf.supremum || n > p.u16(phHeapTop) {
		return 0
	}
	return n
}

// findSlot returns the address of the directory slot, searched from the last slot
// towards slot 1, that points to rec; 0 if there is none (slot 0 never matches).
func findSlot(p *extPage, lastSlot, rec int) int {
	first := slotAddr(p.size, 0)
	if lastSlot >= 0 && first+2 <= p.size && p.size <= len(p.f) {
		// Every slot read is inside the page: one check, not one per slot (the
		// search is a tenth of an apply).
		for s := lastSlot; s < first; s += 2 {
			if int(p.f[s])<<8|int(p.f[s+1]) == rec {
				return s
			}
		}
		return 0
	}
	for s := lastSlot; s < first; s += 2 {
		if p.u16(s) == rec {
			return s
		}
	}
	return 0
}

// splitSlot splits the slot at address slot, whose record owns 9 records, after an
// insert (page_dir_split_slot): a new slot takes the 4th record after the owner of
// the preceding slot, which then owns 4; the old owner keeps 5.
func splitSlot(p *extPage, rf recFmt, slot int) {
	rec := p.u16(slot + 2)
	for i := 0; i < (slotMaxOwned+1)/2; i++ {
		if rec = rf.walkNext(p, rec); rec == 0 {
			p.fault("directory split walks off the record list") // the server would follow a null pointer
			return
		}
	}
	n := p.u16(phNDirSlots)
	newLast := p.size - slot0 - 2*n // where the new last slot goes
	p.move(newLast, newLast+2, slot-newLast)
	p.set16(phNDirSlots, n+1)
	p.set16(slot, rec)
	p.setOwned(rec-rf.extra, (slotMaxOwned+1)/2)
	p.setOwned(p.u16(slot-2)-rf.extra, slotMaxOwned+1-(slotMaxOwned+1)/2)
}

// balanceSlot fixes slot s after a delete left it owning fewer than 4 records
// (page_dir_balance_slot): it merges s into slot s+1 if that one owns at most 4,
// else it takes one record from it. The last slot is left alone.
func balanceSlot(p *extPage, rf recFmt, s int) {
	n := p.u16(phNDirSlots)
	if s+1 == n {
		return
	}
	slot := slotAddr(p.size, s)
	up, cur := p.u16(slot-2), p.u16(slot)
	upOwned := rf.owned(p, up)
	if upOwned <= slotMinOwned {
		p.setOwned(cur-rf.extra, 0)
		p.setOwned(up-rf.extra, upOwned+slotMinOwned-1)
		last := slotAddr(p.size, n-1)
		p.move(last+2, last, slot-last)
		p.fill(last, 2, 0)
		p.set16(phNDirSlots, n-1)
		return
	}
	p.setOwned(cur-rf.extra, 0)
	next := rf.nextPtr(p, cur)
	if next == 0 {
		p.fault("directory balance finds no record after the slot's owner") // the server would follow a null pointer
		return
	}
	p.setOwned(next-rf.extra, slotMinOwned)
	p.setOwned(up-rf.extra, upOwned-1)
	p.set16(slot, next)
}

// memFree takes a deleted record off the page (page_mem_free): the record on top of
// the heap lowers PAGE_HEAP_TOP and PAGE_N_HEAP and is zeroed whole; any other goes
// to the head of the PAGE_FREE list, its data zeroed, its header kept.
func memFree(p *extPage, rf recFmt, rec, dataSize, extraSize int) {
	mask := p.size - 1
	free := p.u16(phFree)
	nHeap := (p.u16(phNHeap) - 1) & 0xFFFF
	h := rf.heapNo(p, rec)
	if nHeap&0x8000 != 0 {
		h |= 0x8000
	}
	top := nHeap == h
	if top {
		savings := p.u16(phHeapTop) - (rec+dataSize)&mask
		p.set16(phHeapTop, (rec-extraSize)&mask)
		p.set16(phNHeap, nHeap)
		if savings != 0 {
			p.set16(phGarbage, p.u16(phGarbage)-savings)
		}
	} else {
		p.set16(phFree, rec&mask)
		p.set16(phGarbage, p.u16(phGarbage)+extraSize+dataSize)
	}
	p.fill(phLastInsert, 2, 0)
	p.set16(phNRecs, p.u16(phNRecs)-1)
	start := rec
	if top {
		start = rec - extraSize
	} else {
		next := 0
		if free != 0 {
			next = free
			if nHeap&0x8000 != 0 {
				next = free - rec
			}
		}
		p.set16(rec-2, next)
	}
	if rec+dataSize > start {
		p.fill(start, rec+dataSize-start, 0)
	}
}

// updateDirection maintains PAGE_DIRECTION_B and PAGE_N_DIRECTION after an insert
// between prevRec and nextRec, given PAGE_LAST_INSERT from before it. R-tree pages
// keep theirs.
func updateDirection(p *extPage, lastInsert, prevRec, nextRec int) {
	if p.u8(offPageTyp+1) == pageTypeRTree&0xFF {
		return
	}
	d := p.u8(phDirection)
	switch {
	case lastInsert == 0:
	case lastInsert == prevRec && d&7 != dirLeft:
		p.set8(phDirection, d&^7|dirRight)
		p.set16(phNDirection, p.u16(phNDirection)+1)
		return
	case lastInsert == nextRec && d&7 != dirRight:
		p.set8(phDirection, d&^7|dirLeft)
		p.set16(phNDirection, p.u16(phNDirection)+1)
		return
	}
	p.set8(phDirection, d&^7|dirNoDirection)
	p.fill(phNDirection, 2, 0)
}
