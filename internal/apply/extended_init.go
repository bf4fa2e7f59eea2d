package apply

import "fmt"

// Infimum and supremum of an empty page (page0page.cc), written at PAGE_DATA:
// REDUNDANT headers hold the end offset of the one field, n_owned 1, heap number,
// one field with 1-byte offsets and an absolute next; COMPACT ones n_owned 1, heap
// number and status, and a relative next.
const (
	emptyRedundant = "\x08\x01\x00\x00\x03\x00\x74infimum\x00" + "\x09\x01\x00\x08\x03\x00\x00supremum\x00"
	emptyCompact   = "\x01\x00\x02\x00\x0dinfimum\x00" + "\x01\x00\x0b\x00\x00supremum"
)

// pageCreate makes the frame an empty index page (page_create_low). It keeps the
// FIL header and trailer, PAGE_LEVEL, PAGE_INDEX_ID and the segment headers.
func pageCreate(f []byte, compact bool) {
	size := len(f)
	f[offPageTyp], f[offPageTyp+1] = pageTypeIndex>>8, pageTypeIndex&0xFF
	clear(f[phNDirSlots : phNDirSlots+phPrivEnd])
	f[phNDirSlots+1] = 2
	f[phDirection] = dirNoDirection
	tmpl, top, inf, sup := emptyRedundant, oldSupremumEnd, oldInfimum, oldSupremum
	if compact {
		tmpl, top, inf, sup = emptyCompact, newSupremumEnd, newInfimum, newSupremum
		f[phNHeap] = 0x80
	}
	f[phNHeap+1] = 2
	f[phHeapTop+1] = byte(top)
	copy(f[pageData:], tmpl)
	clear(f[top : size-pageDirEnd])
	f[slotAddr(size, 1)+1] = byte(sup)
	f[slotAddr(size, 0)+1] = byte(inf)
}

// Undo page header (trx0undo.h), at FIL_PAGE_DATA.
const (
	undoPageType  = 38 // TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_TYPE
	undoPageStart = 40
	undoPageFree  = 42
	undoPageNode  = 44 // FLST node: prev page, prev byte, next page, next byte
	undoHdrEnd    = 56 // TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_HDR_SIZE = TRX_UNDO_SEG_HDR
	undoSegEnd    = 86 // TRX_UNDO_SEG_HDR + TRX_UNDO_SEG_HDR_SIZE
)

// undoPageInit makes the frame an empty undo log page (trx_undo_page_init). The undo
// segment header (bytes 56 to 85) is kept; the rest of the body is zeroed.
func undoPageInit(f []byte) {
	f[offPageTyp], f[offPageTyp+1] = 0, pageTypeUndo
	f[undoPageType], f[undoPageType+1] = 0, 0
	f[undoPageStart], f[undoPageStart+1] = 0, undoHdrEnd
	f[undoPageFree], f[undoPageFree+1] = 0, undoHdrEnd
	node := f[undoPageNode : undoPageNode+12]
	copy(node, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0})
	clear(f[undoSegEnd : len(f)-pageDirEnd])
}

// undoAppend appends one undo record body to an undo log page (log_phys_t::undo_append):
// at TRX_UNDO_PAGE_FREE it writes the offset of the next record, the body, and the
// offset of this record, then moves TRX_UNDO_PAGE_FREE past them.
func undoAppend(f []byte, data []byte) error {
	free := int(f[undoPageFree])<<8 | int(f[undoPageFree+1])
	n := len(data)
	if free < undoHdrEnd || free+n+6 >= len(f)-pageDirEnd {
		return fmt.Errorf("page corrupted: TRX_UNDO_PAGE_FREE %d cannot take a %d-byte undo record", free, n)
	}
	next := free + 4 + n
	f[undoPageFree], f[undoPageFree+1] = byte(next>>8), byte(next)
	f[free], f[free+1] = byte(next>>8), byte(next)
	copy(f[free+2:], data)
	f[free+2+n], f[free+3+n] = byte(free>>8), byte(free)
	return nil
}
