package apply

import (
	"encoding/binary"
	"fmt"

	"github.com/ferry-backup/ferry/internal/redo"
)

// applyGroup applies the records of one group to frame, the page as the server holds
// it in the buffer pool (the ROW_FORMAT=COMPRESSED image for such tablespaces, of
// len(frame) bytes). zip tells EXTENDED records are refused (compressed pages are
// logged physically). A malformed or inconsistent record is an error; frame may then
// be partly changed, and the caller drops it.
func applyGroup(frame []byte, recs []byte, zip bool) error {
	w := recWalker{recs: recs}
	for w.next() {
		if w.file {
			return fmt.Errorf("file-level record inside a page's records")
		}
		if err := applyRecord(frame, &w, zip); err != nil {
			return fmt.Errorf("%s: %w", recordName(w.typ, w.body), err)
		}
	}
	return w.err
}

// applyRecord applies the walker's current record (log_phys_t::apply).
func applyRecord(frame []byte, w *recWalker, zip bool) error {
	switch w.typ {
	case recFree, recOption:
		return nil
	case recInit:
		initPage(frame, w.id)
		return nil
	case recExtended:
		if w.id.Page < 3 {
			return fmt.Errorf("EXTENDED record for page %d", w.id.Page)
		}
		if zip {
			return fmt.Errorf("EXTENDED record for a ROW_FORMAT=COMPRESSED page")
		}
		return applyExtendedUndo(frame, w.id.Page, w.body, false)
	case recWrite, recMemset, recMemmove:
		return applyBytes(frame, w)
	}
	return fmt.Errorf("record type %#x", w.typ)
}

// initPage is INIT_PAGE: a zeroed page that knows its number and space.
func initPage(frame []byte, id redo.PageID) {
	clear(frame)
	binary.BigEndian.PutUint32(frame[4:], id.Page)
	for i := 8; i < 16; i++ {
		frame[i] = 0xFF
	}
	binary.BigEndian.PutUint32(frame[34:], id.Space)
}

// applyBytes applies WRITE, MEMSET and MEMMOVE with the server's bounds checks.
func applyBytes(frame []byte, w *recWalker) error {
	size := len(frame)
	if w.lastBase() == 1 {
		return fmt.Errorf("follows a record that ends the running offset")
	}
	off, k := redo.Varint(w.body)
	if k == 0 || k > 3 || k >= len(w.body) {
		return fmt.Errorf("bad offset")
	}
	at := w.lastBase() + int(off)
	if int(off) >= size || at < 8 || at >= size {
		return fmt.Errorf("offset %d outside the page", at)
	}
	rest := w.body[k:]
	switch w.typ {
	case recWrite:
		if at+len(rest) > size {
			return fmt.Errorf("%d bytes at %d run past the page", len(rest), at)
		}
		copy(frame[at:], rest)
		return nil
	case recMemset:
		return memset(frame, at, rest)
	}
	return memmove(frame, at, rest)
}

// memset is MEMSET: a length, then the pattern repeated over it.
func memset(frame []byte, at int, rest []byte) error {
	l, m := redo.Varint(rest)
	if m == 0 || m > 3 || m >= len(rest) {
		return fmt.Errorf("bad length")
	}
	n, pat := int(l), rest[m:]
	if at+n > len(frame) {
		return fmt.Errorf("%d bytes at %d run past the page", n, at)
	}
	if n%len(pat) != 0 {
		return fmt.Errorf("length %d is not a multiple of the %d-byte pattern", n, len(pat))
	}
	for i := 0; i < n; i += len(pat) {
		copy(frame[at+i:], pat)
	}
	return nil
}

// memmove is MEMMOVE: a length, then the source as a signed distance from the target.
func memmove(frame []byte, at int, rest []byte) error {
	l, m := redo.Varint(rest)
	if m == 0 || m > 3 || m >= len(rest) {
		return fmt.Errorf("bad length")
	}
	s, k := redo.Varint(rest[m:])
	if k == 0 || k > 3 || m+k != len(rest) {
		return fmt.Errorf("bad source")
	}
	n := int(l)
	src := at + int(s>>1) + 1
	if s&1 != 0 {
		src = at - int(s>>1) - 1
	}
	if at+n > len(frame) || src < 8 || src+n > len(frame) {
		return fmt.Errorf("%d bytes from %d to %d outside the page", n, src, at)
	}
	copy(frame[at:at+n], frame[src:src+n])
	return nil
}
