package apply

import (
	"errors"
	"fmt"

	"github.com/ferry-backup/ferry/internal/redo"
)

// recWalker walks the records of one mini-transaction, or of one page's group.
type recWalker struct {
	recs []byte
	p    int
	page bool // a page record was seen: a set high bit now means "same page"

	rec  []byte      // the whole current record
	typ  byte        // its type (bits 6..4)
	same bool        // it has no page ids: same page as the record before
	file bool        // a file-level record (FILE_*), not a page record
	id   redo.PageID // its page
	body []byte      // its bytes after the header, length and page ids
	last int         // running offset before this record (page_recv_t::last_offset)
	err  error
}

// next moves to the next record; false at the end or on a malformed one (err set).
func (w *recWalker) next() bool {
	if w.err != nil || w.p >= len(w.recs) || w.recs[w.p] <= 1 {
		return false
	}
	if w.rec != nil {
		w.last = w.advance()
	}
	n, ok := redo.RecordLen(w.recs[w.p:])
	if !ok {
		w.err = fmt.Errorf("bad record length at offset %d", w.p)
		return false
	}
	w.rec = w.recs[w.p : w.p+n]
	w.p += n
	b := w.rec[0]
	w.typ, w.body, w.file = b&0x70, redo.RecordBody(w.rec), false
	w.same = b&0x80 != 0 && w.page
	if b&0x80 != 0 && !w.page {
		w.file = true
		return true
	}
	if !w.same {
		w.page = true
		return w.ids()
	}
	return true
}

// ids decodes the page ids that lead the record body.
func (w *recWalker) ids() bool {
	space, k := redo.Varint(w.body)
	if k == 0 || k > 5 || space > 0xFFFFFFFF {
		w.err = errors.New("bad space id")
		return false
	}
	no, m := redo.Varint(w.body[k:])
	if m == 0 || m > 5 || no > 0xFFFFFFFF {
		w.err = errors.New("bad page number")
		return false
	}
	w.id, w.body, w.last = redo.PageID{Space: uint32(space), Page: uint32(no)}, w.body[k+m:], 0
	return true
}

// advance returns the running offset after the current record, as the server keeps
// it while parsing (only WRITE, MEMSET and MEMMOVE move it by their length).
func (w *recWalker) advance() int {
	switch w.typ {
	case recFree:
		return 1
	case recInit, recExtended:
		return 24
	case recWrite, recMemset, recMemmove:
		at, n := w.span()
		if at < 0 {
			return 1
		}
		return at + n
	}
	return w.last
}

// span is where the current WRITE, MEMSET or MEMMOVE starts and how many bytes it
// covers, from the running offset; at < 0 if it is malformed.
func (w *recWalker) span() (at, n int) {
	off, k := redo.Varint(w.body)
	if k == 0 || k > 3 || k >= len(w.body) {
		return -1, 0
	}
	at = w.lastBase() + int(off)
	if w.typ == recWrite {
		return at, len(w.body) - k
	}
	l, m := redo.Varint(w.body[k:])
	if m == 0 || m > 3 {
		return -1, 0
	}
	return at, int(l)
}

// lastBase is the running offset the current record's offset is added to.
func (w *recWalker) lastBase() int {
	if !w.same {
		return 0
	}
	return w.last
}

// writeRange returns where the current WRITE puts its data, and the data.
func (w *recWalker) writeRange() (int, []byte) {
	_, k := redo.Varint(w.body)
	at, _ := w.span()
	if at < 0 {
		return -1, nil
	}
	return at, w.body[k:]
}
