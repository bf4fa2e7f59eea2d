package apply

import "fmt"

// Subtypes of EXTENDED records (mrec_ext_t, mtr0types.h).
const (
	extInitRedundant   = 0
	extInitDynamic     = 1
	extUndoInit        = 2
	extUndoAppend      = 3
	extInsertHeapRed   = 4
	extInsertReuseRed  = 5
	extInsertHeapDyn   = 6
	extInsertReuseDyn  = 7
	extDeleteRedundant = 8
	extDeleteDynamic   = 9
	extTrimPages       = 10
)

// applyExtended applies the payload of one EXTENDED record (subtype byte first) to the
// uncompressed page frame of page pageNo. It returns an error, and leaves frame
// unchanged, when the server would find the record or the page corrupt.
// TRIM_PAGES never reaches it (the caller handles it while parsing).
func applyExtended(frame []byte, pageNo uint32, payload []byte) error {
	return fmt.Errorf("EXTENDED records are not applied yet")
}

// extendedName names an EXTENDED subtype for messages, e.g. "INSERT_HEAP_DYNAMIC".
func extendedName(subtype byte) string {
	return fmt.Sprintf("EXTENDED(%d)", subtype)
}
