package apply

// Byte offsets and constants of index pages (fil0fil.h, page0page.h, rem0rec.h) used
// by the EXTENDED records.
const (
	offPageNo  = 4  // FIL_PAGE_OFFSET
	offPageTyp = 24 // FIL_PAGE_TYPE

	pageTypeIndex   = 17855 // FIL_PAGE_INDEX
	pageTypeRTree   = 17854 // FIL_PAGE_RTREE
	pageTypeInstant = 18    // FIL_PAGE_TYPE_INSTANT
	pageTypeUndo    = 2     // FIL_PAGE_UNDO_LOG

	phNDirSlots  = 38 // PAGE_HEADER + PAGE_N_DIR_SLOTS
	phHeapTop    = 40
	phNHeap      = 42
	phFree       = 44
	phGarbage    = 46
	phLastInsert = 48
	phDirection  = 51 // PAGE_DIRECTION_B (low 3 bits)
	phNDirection = 52
	phNRecs      = 54
	phLevel      = 64
	phPrivEnd    = 26 // PAGE_HEADER_PRIV_END: bytes zeroed by page_create_low
	pageData     = 94

	oldInfimum     = 101
	oldSupremum    = 116
	oldSupremumEnd = 125
	oldExtra       = 6 // REC_N_OLD_EXTRA_BYTES
	newInfimum     = 99
	newSupremum    = 112
	newSupremumEnd = 120
	newExtra       = 5 // REC_N_NEW_EXTRA_BYTES

	pageDirEnd   = 8  // PAGE_DIR: the directory ends above the FIL trailer
	slot0        = 10 // distance of slot 0 from the end of the page
	slotMaxOwned = 8  // PAGE_DIR_SLOT_MAX_N_OWNED
	slotMinOwned = 4  // PAGE_DIR_SLOT_MIN_N_OWNED
	recMaxFields = 1023

	dirLeft        = 1
	dirRight       = 2
	dirNoDirection = 5

	statusNodePtr = 1
	statusInstant = 4
)

// slotAddr is the byte offset of directory slot i.
func slotAddr(size, i int) int { return size - slot0 - 2*i }

// indexPageCheck is fil_page_index_page_check: B-tree, R-tree or instant-ALTER root.
func indexPageCheck(p *extPage) bool {
	t := p.u16(offPageTyp)
	return t == pageTypeIndex || t == pageTypeRTree || t == pageTypeInstant
}

// pageNoIs reports whether the FIL header names page pageNo.
func pageNoIs(p *extPage, pageNo uint32) bool {
	return uint32(p.u16(offPageNo))<<16|uint32(p.u16(offPageNo+2)) == pageNo
}
