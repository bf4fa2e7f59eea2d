package apply

import (
	"fmt"
	"strconv"
)

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
	return applyExtendedUndo(frame, pageNo, payload, true)
}

// applyExtendedUndo is applyExtended; with undo false a refused record may leave the
// frame partly changed (the engine, which then drops the page, saves the journal).
func applyExtendedUndo(frame []byte, pageNo uint32, payload []byte, undo bool) error {
	if len(payload) == 0 {
		return fmt.Errorf("EXTENDED record without a subtype")
	}
	sub := payload[0]
	if err := applyExtendedSub(frame, pageNo, payload, undo); err != nil {
		return fmt.Errorf("%s: %w", extendedName(sub), err)
	}
	return nil
}

// applyExtendedSub checks the page size and the subtype's length rules, then applies.
func applyExtendedSub(frame []byte, pageNo uint32, payload []byte, undo bool) error {
	if len(frame) < 4096 || len(frame)&(len(frame)-1) != 0 || len(frame) > 65536 {
		return fmt.Errorf("page size %d is not a power of 2 from 4096 to 65536", len(frame))
	}
	switch sub, rlen := payload[0], len(payload); sub {
	case extInitRedundant, extInitDynamic:
		if rlen != 1 {
			return fmt.Errorf("%d bytes after the subtype, want none", rlen-1)
		}
		pageCreate(frame, sub == extInitDynamic)
		return nil
	case extUndoInit:
		if rlen != 1 {
			return fmt.Errorf("%d bytes after the subtype, want none", rlen-1)
		}
		undoPageInit(frame)
		return nil
	case extUndoAppend:
		if rlen <= 3 {
			return fmt.Errorf("undo record of %d bytes, want at least 3", rlen-1)
		}
		return undoAppend(frame, payload[1:])
	case extInsertHeapRed, extInsertReuseRed, extInsertHeapDyn, extInsertReuseDyn:
		in, err := parseInsert(payload)
		if err != nil {
			return err
		}
		if sub&2 != 0 {
			return insertDynamic(extView(frame, undo), pageNo, in)
		}
		return insertRedundant(extView(frame, undo), pageNo, in)
	case extDeleteRedundant:
		prev, err := parseDeleteRedundant(payload)
		if err != nil {
			return err
		}
		return deleteRedundant(extView(frame, undo), pageNo, prev)
	case extDeleteDynamic:
		prev, hdr, data, err := parseDeleteDynamic(payload)
		if err != nil {
			return err
		}
		return deleteDynamic(extView(frame, undo), pageNo, prev, hdr, data)
	case extTrimPages:
		return fmt.Errorf("applied while parsing the log, not to a page")
	}
	return fmt.Errorf("unknown subtype")
}

// extendedName names an EXTENDED subtype for messages, e.g. "INSERT_HEAP_DYNAMIC".
func extendedName(subtype byte) string {
	switch subtype {
	case extInitRedundant:
		return "INIT_ROW_FORMAT_REDUNDANT"
	case extInitDynamic:
		return "INIT_ROW_FORMAT_DYNAMIC"
	case extUndoInit:
		return "UNDO_INIT"
	case extUndoAppend:
		return "UNDO_APPEND"
	case extInsertHeapRed:
		return "INSERT_HEAP_REDUNDANT"
	case extInsertReuseRed:
		return "INSERT_REUSE_REDUNDANT"
	case extInsertHeapDyn:
		return "INSERT_HEAP_DYNAMIC"
	case extInsertReuseDyn:
		return "INSERT_REUSE_DYNAMIC"
	case extDeleteRedundant:
		return "DELETE_ROW_FORMAT_REDUNDANT"
	case extDeleteDynamic:
		return "DELETE_ROW_FORMAT_DYNAMIC"
	case extTrimPages:
		return "TRIM_PAGES"
	}
	return "EXTENDED(" + strconv.Itoa(int(subtype)) + ")"
}

// extInsert holds the fields of an INSERT_* record (mtr_t::page_insert).
type extInsert struct {
	reuse bool
	prev  int    // predecessor's offset from the infimum
	shift int    // DYNAMIC REUSE: header size change, |x|<<1 | (x<0)
	enc   int    // REDUNDANT: (n_fields-1)<<3 | short<<2 | info>>4; DYNAMIC: hdr_l<<3 | status&4 | info>>4
	hdrC  int    // header bytes shared with the predecessor
	dataC int    // data bytes shared with the predecessor
	lit   []byte // literal header bytes, then literal data bytes
}

// parseInsert splits an INSERT_* payload with the length rules of log_phys_t::apply
// (10.11.19: the last varint, data_c, may end the record).
func parseInsert(payload []byte) (extInsert, error) {
	sub := payload[0]
	in := extInsert{reuse: sub&1 != 0}
	if len(payload) < 2 {
		return in, fmt.Errorf("record too short")
	}
	r := extReader{rest: payload[1:]}
	in.prev = r.next("prev", 3, false)
	if sub&2 != 0 {
		if in.reuse {
			in.shift = r.next("shift", 3, false)
		}
		in.enc = r.next("enc_hdr_l", 3, false)
		in.hdrC = r.next("hdr_c", 2, false)
		in.dataC = r.next("data_c", 3, true)
	} else {
		in.enc = r.next("enc_hdr", 2, false)
		in.hdrC = r.next("hdr_c", 2, false)
		in.dataC = r.next("data_c", 2, true)
	}
	if r.err != "" {
		return in, fmt.Errorf("%s", r.err)
	}
	in.lit = r.rest
	return in, nil
}

// parseDeleteRedundant returns the predecessor offset of a DELETE_ROW_FORMAT_REDUNDANT
// record: one varint of 1 to 3 bytes that ends the record.
func parseDeleteRedundant(payload []byte) (int, error) {
	if len(payload) < 2 || len(payload) > 4 {
		return 0, fmt.Errorf("record of %d bytes, want 2 to 4", len(payload))
	}
	r := extReader{rest: payload[1:]}
	prev := r.next("prev", len(payload)-1, true)
	if r.err != "" || len(r.rest) != 0 {
		return 0, fmt.Errorf("bad length of field prev")
	}
	return prev, nil
}

// parseDeleteDynamic returns the fields of a DELETE_ROW_FORMAT_DYNAMIC record:
// predecessor offset, header size beyond the fixed 5 bytes, data size.
func parseDeleteDynamic(payload []byte) (prev, hdr, data int, err error) {
	if len(payload) < 2 {
		return 0, 0, 0, fmt.Errorf("record too short")
	}
	r := extReader{rest: payload[1:]}
	prev = r.next("prev", 3, false)
	hdr = r.next("hdr_size", 2, false)
	data = r.next("data_size", 3, true)
	if r.err == "" && len(r.rest) != 0 {
		r.err = "bytes after field data_size"
	}
	if r.err != "" {
		return 0, 0, 0, fmt.Errorf("%s", r.err)
	}
	return prev, hdr, data, nil
}
