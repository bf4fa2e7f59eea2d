package apply

// deleteTarget is what the delete checks find on the page.
type deleteTarget struct {
	lastSlot int // address of the last directory slot
	prevRec  int // origin of the predecessor
	rec      int // origin of the record to delete
	next     int // origin of its successor
	owner    int // owner of the record's slot
	nOwned   int // records it will own after the delete
	slot     int // address of that slot
}

// checkDeletePage is the first group of checks of both delete functions.
func checkDeletePage(p *extPage, pageNo uint32, rf recFmt) (int, error) {
	nSlots := p.u16(phNDirSlots)
	switch {
	case p.u16(phNRecs) == 0:
		return 0, p.corrupt("PAGE_N_RECS is 0")
	case nSlots < 2:
		return 0, p.corrupt("PAGE_N_DIR_SLOTS %d", nSlots)
	}
	if err := checkIndexPage(p, pageNo, rf); err != nil {
		return 0, err
	}
	if compact := p.u16(phNHeap)&0x8000 != 0; compact != rf.compact {
		return 0, p.corrupt("row format of the page does not match the record")
	}
	return slotAddr(p.size, nSlots-1), nil
}

// inDelete reports whether off is the supremum or a record origin between the heap
// bottom and the last slot (the range the delete functions accept).
func inDelete(rf recFmt, t *deleteTarget, off int) bool {
	return off == rf.supremum || off >= rf.heapBot+rf.extra && off <= t.lastSlot
}

// findDeleteOwner finds the owner of t.rec (at most PAGE_N_RECS hops) and its slot.
func findDeleteOwner(p *extPage, rf recFmt, t *deleteTarget) error {
	s, hops := t.rec, p.u16(phNRecs)
	for {
		if t.nOwned = rf.owned(p, s); t.nOwned != 0 {
			break
		}
		rel := p.u16(s - 2)
		if rf.compact {
			if rel < newExtra || rel > 0x10000-newExtra {
				return p.corrupt("record %d has next field %d", s, rel)
			}
			s = (s + rel) & 0xFFFF
		} else {
			s = rel
		}
		if !inDelete(rf, t, s) {
			return p.corrupt("record list leaves the heap at %d", s)
		}
		if hops == 0 {
			return p.corrupt("record list has a cycle")
		}
		hops--
	}
	t.nOwned--
	t.owner = s
	if t.slot = findSlot(p, t.lastSlot, s); t.slot == 0 {
		return p.corrupt("no directory slot points to record %d", s)
	}
	return p.done()
}

// finishDelete unlinks the record: the slot of a deleted owner moves to the
// predecessor, the owner owns one record less, the record is freed and the slot
// balanced if it owns fewer than 4.
func finishDelete(p *extPage, rf recFmt, t *deleteTarget, dataSize, extraSize int) error {
	if t.rec == t.owner {
		t.owner = t.prevRec
		p.set16(t.slot, t.owner)
	}
	if rf.compact {
		p.set16(t.prevRec-2, t.next-t.prevRec)
	} else {
		p.move(t.prevRec-2, t.rec-2, 2)
	}
	p.setOwned(t.owner-rf.extra, t.nOwned)
	memFree(p, rf, t.rec, dataSize, extraSize)
	if t.nOwned < slotMinOwned {
		balanceSlot(p, rf, (slotAddr(p.size, 0)-t.slot)/2)
	}
	return p.done()
}

// deleteRedundant applies DELETE_ROW_FORMAT_REDUNDANT (page_apply_delete_redundant).
func deleteRedundant(p *extPage, pageNo uint32, prev int) error {
	rf := redundantFmt()
	var t deleteTarget
	var err error
	if t.lastSlot, err = checkDeletePage(p, pageNo, rf); err != nil {
		return err
	}
	if t.prevRec = rf.infimum + prev; t.prevRec > t.lastSlot {
		return p.corrupt("predecessor %d above the directory", t.prevRec)
	}
	t.rec = p.u16(t.prevRec - 2)
	if t.rec < rf.heapBot+oldExtra || t.rec > t.lastSlot {
		return p.corrupt("record %d outside the heap", t.rec)
	}
	n, short := oldFields(p, t.rec)
	extra := oldExtraSize(n, short)
	if t.rec < rf.heapBot+extra {
		return p.corrupt("record %d header below the heap", t.rec)
	}
	dataSize := oldDataSize(p, t.rec, n, short)
	if t.rec+dataSize > t.lastSlot {
		return p.corrupt("record %d ends in the directory", t.rec)
	}
	if t.next = p.u16(t.rec - 2); !inDelete(rf, &t, t.next) {
		return p.corrupt("successor %d outside the heap", t.next)
	}
	if err := findDeleteOwner(p, rf, &t); err != nil {
		return err
	}
	return finishDelete(p, rf, &t, dataSize, extra)
}

// deleteDynamic applies DELETE_ROW_FORMAT_DYNAMIC (page_apply_delete_dynamic). The
// header and data sizes come from the record, as the server trusts them.
func deleteDynamic(p *extPage, pageNo uint32, prev, hdrSize, dataSize int) error {
	rf := compactFmt()
	var t deleteTarget
	var err error
	if t.lastSlot, err = checkDeletePage(p, pageNo, rf); err != nil {
		return err
	}
	if t.prevRec = (rf.infimum + prev) & 0xFFFF; t.prevRec > t.lastSlot {
		return p.corrupt("predecessor %d above the directory", t.prevRec)
	}
	t.rec = (t.prevRec + p.u16(t.prevRec-2)) & 0xFFFF
	if t.rec < rf.heapBot+newExtra || t.rec > t.lastSlot {
		return p.corrupt("record %d outside the heap", t.rec)
	}
	extra := newExtra + hdrSize
	if t.rec < rf.heapBot+extra || t.rec+dataSize > t.lastSlot {
		return p.corrupt("record %d of %d+%d bytes outside the heap", t.rec, extra, dataSize)
	}
	if t.next = (t.rec + p.u16(t.rec-2)) & 0xFFFF; !inDelete(rf, &t, t.next) {
		return p.corrupt("successor %d outside the heap", t.next)
	}
	if err := findDeleteOwner(p, rf, &t); err != nil {
		return err
	}
	return finishDelete(p, rf, &t, dataSize, extra)
}
