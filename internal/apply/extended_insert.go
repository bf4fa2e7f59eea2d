package apply

// insertTarget is what the checks common to both INSERT formats find on the page.
type insertTarget struct {
	heapTop   int // PAGE_HEAP_TOP
	lastSlot  int // address of the last directory slot
	prevRec   int // origin of the predecessor
	nextRec   int // origin of the successor
	owner     int // the record owning the successor's directory slot
	nOwned    int // how many records it owns
	ownerSlot int // address of its slot
}

// checkHeapAndDir checks PAGE_HEAP_TOP and the first and last directory slots, and
// returns PAGE_HEAP_TOP and the address of the last slot.
func checkHeapAndDir(p *extPage, rf recFmt, nSlots int) (heapTop, lastSlot int, err error) {
	lastSlot = slotAddr(p.size, nSlots-1)
	heapTop = p.u16(phHeapTop)
	if heapTop < rf.heapBot || heapTop > lastSlot {
		return 0, 0, p.corrupt("PAGE_HEAP_TOP %d outside [%d, %d]", heapTop, rf.heapBot, lastSlot)
	}
	if v := p.u16(lastSlot); v != rf.supremum {
		return 0, 0, p.corrupt("last directory slot points to %d, not the supremum", v)
	}
	if v := p.u16(slotAddr(p.size, 0)); v != rf.infimum {
		return 0, 0, p.corrupt("first directory slot points to %d, not the infimum", v)
	}
	return heapTop, lastSlot, nil
}

// findInsertOwner finds the owner of nextRec and its slot, as both insert functions do:
// at most 8 hops, each to the supremum or to a record inside the heap.
func findInsertOwner(p *extPage, rf recFmt, t *insertTarget) error {
	owner, hops := t.nextRec, slotMaxOwned
	for {
		if t.nOwned = rf.owned(p, owner); t.nOwned != 0 {
			break
		}
		if rf.compact {
			owner = (owner + p.u16(owner-2)) & 0xFFFF
		} else {
			owner = p.u16(owner - 2)
		}
		if owner != rf.supremum && (owner < rf.heapBot+rf.extra || owner > t.heapTop) {
			return p.corrupt("record list leaves the heap at %d", owner)
		}
		if hops == 0 {
			return p.corrupt("no owner within 9 records of %d", t.nextRec)
		}
		hops--
	}
	if t.nOwned > slotMaxOwned {
		return p.corrupt("record %d owns %d records", owner, t.nOwned)
	}
	t.owner = owner
	if t.ownerSlot = findSlot(p, t.lastSlot, owner); t.ownerSlot == 0 {
		return p.corrupt("no directory slot points to record %d", owner)
	}
	return nil
}

// finishInsert does what both formats do after the record is written: the owner owns
// one more record, the direction is updated, PAGE_N_RECS grows, and a slot that now
// owns 9 records is split.
func finishInsert(p *extPage, rf recFmt, t *insertTarget, lastInsert int) error {
	p.setOwned(t.owner-rf.extra, t.nOwned+1)
	updateDirection(p, lastInsert, t.prevRec, t.nextRec)
	p.set16(phNRecs, p.u16(phNRecs)+1)
	if t.nOwned == slotMaxOwned {
		splitSlot(p, rf, t.ownerSlot)
	}
	return p.done()
}
