package apply

import (
	"encoding/binary"
	"slices"

	"github.com/ferry-backup/ferry/internal/faultpoint"

	"github.com/ferry-backup/ferry/internal/redo"
)

// Record types (bits 6..4 of a page record's first byte; mrec_type_t).
const (
	recFree     = 0x00
	recInit     = 0x10
	recExtended = 0x20
	recWrite    = 0x30
	recMemset   = 0x40
	recMemmove  = 0x50
	recReserved = 0x60
	recOption   = 0x70
)

// recordName names a record type for messages.
func recordName(typ byte, body []byte) string {
	switch typ {
	case recFree:
		return "FREE_PAGE"
	case recInit:
		return "INIT_PAGE"
	case recExtended:
		if len(body) > 0 {
			return "EXTENDED/" + extendedName(body[0])
		}
		return "EXTENDED"
	case recWrite:
		return "WRITE"
	case recMemset:
		return "MEMSET"
	case recMemmove:
		return "MEMMOVE"
	case recReserved:
		return "RESERVED"
	}
	return "OPTION"
}

// group is the records of one mini-transaction for one page, verbatim (page ids
// included), in the batch's arena. A page's groups are chained in log order. Under
// bulk updates a group is often shorter than this index entry, which is why it is
// kept to 24 bytes and counted in the batch's memory (batch.bytes).
type group struct {
	start uint64 // the mini-transaction's start LSN
	len   uint32 // its end LSN - start
	off   uint32 // its records in the arena (maxMemory keeps offsets in range)
	n     uint32
	next  int32 // the page's next group in batch.groups; -1: none
}

// groupSize is the bytes of a group in batch.groups.
const groupSize = 24

// end is the mini-transaction's end LSN: the FIL_PAGE_LSN it leaves on the page.
func (g *group) end() uint64 { return g.start + uint64(g.len) }

// pageLog is what a batch holds for one page.
type pageLog struct {
	first, last int32 // the page's groups in batch.groups, chained by next; -1: none
	// init: the first group starts with INIT_PAGE, so the page is built, not read.
	// freed: the page's log is FREE_PAGE alone (the page is left as it is).
	init, freed bool
}

// spaceLog is what the whole log says about one tablespace.
type spaceLog struct {
	name     string // the file name of its last FILE_CREATE/FILE_MODIFY/FILE_RENAME
	deleted  bool   // FILE_DELETE: its records are dropped
	created  bool   // FILE_CREATE in this log: the tablespace is newer than the checkpoint
	recvSize uint32 // the last nonzero FSP_SIZE the redo writes to page 0
	flags    uint32 // the last FSP_SPACE_FLAGS the redo writes to page 0
	hasFlags bool
}

// trim is a TRIM_PAGES record: an undo tablespace truncated to pages.
type trim struct {
	space uint32
	pages uint32
}

// batch is the records of a run of mini-transactions, by page.
type batch struct {
	arena  []byte
	groups []group // every page's, chained by page (pageLog)
	pages  map[redo.PageID]*pageLog
	trims  []trim
}

// newBatch returns an empty batch whose records go into arena (emptied, reused).
func newBatch(arena []byte) *batch {
	return &batch{arena: arena[:0], pages: map[redo.PageID]*pageLog{}}
}

// bytes is the memory the batch's records and their index take (the pages map,
// about a hundred bytes a page, is left out: pages are far fewer than groups).
func (b *batch) bytes() int { return len(b.arena) + cap(b.groups)*groupSize }

// group returns group i of the batch.
func (b *batch) group(i int32) *group { return &b.groups[i] }

// empty tells whether a page has no records left in the batch.
func (pl *pageLog) empty() bool { return pl.first < 0 }

// parser splits mini-transactions into per-page groups.
type parser struct {
	b        *batch
	spaces   map[uint32]*spaceLog
	pageSize int           // innodb_page_size: no record is longer
	pending  []pending     // this mini-transaction's page records
	order    []redo.PageID // its pages, in order of first record
	// reset is the start LSN of the last mini-transaction that frees or initializes
	// each page, over the whole log (the first pass fills it, the second reads it): a
	// page's records older than that are dropped even when they fall in an earlier
	// batch, as the server's recovery drops them (mlog_init), because the page's
	// image on disk need not be the one they apply to (a page freed before it was
	// written back keeps an older image).
	reset  map[redo.PageID]uint64
	inject bool // FERRY_TEST_FAIL=apply-record: refuse the first EXTENDED record
	dry    bool // check the records only: store nothing (the first pass)
	// deletes: a FILE_DELETE was seen, so a record's tablespace may be deleted (looked
	// up only then: the lookup per record is a tenth of a parse).
	deletes bool
	// gone: tablespaces the whole log deletes (the first pass's finding): a batch
	// rolled before their FILE_DELETE is read must not write them either (their file
	// may be gone from the copy), as the server skips the records of a tablespace its
	// first pass saw deleted.
	gone map[uint32]bool
}

// space returns the log state of space id, creating it.
func (p *parser) space(id uint32) *spaceLog {
	s := p.spaces[id]
	if s == nil {
		s = &spaceLog{}
		p.spaces[id] = s
	}
	return s
}

// add files the records of one mini-transaction.
func (p *parser) add(m redo.MTR) error {
	ops, err := redo.FileOps(m.Recs, m.Start)
	if err != nil {
		return err
	}
	for _, op := range ops {
		p.fileOp(op)
	}
	p.pending = p.pending[:0]
	w := recWalker{recs: m.Recs}
	for w.next() {
		if w.err != nil {
			return p.corrupt(m, w, w.err.Error())
		}
		if w.file {
			continue
		}
		if err := p.record(m, &w); err != nil {
			return err
		}
	}
	if w.err != nil {
		return &RecordError{LSN: m.Start, Record: "?", Reason: w.err.Error()}
	}
	if !p.dry {
		p.storeMtr(m)
	}
	return nil
}

// fileOp applies a file-level record to the tablespace's log state.
func (p *parser) fileOp(op redo.FileOp) {
	s := p.space(op.SpaceID)
	switch op.Kind {
	case redo.FileDelete:
		s.deleted, p.deletes = true, true
		p.dropSpace(op.SpaceID)
	case redo.FileRename:
		s.name = op.NewName
	default:
		s.name, s.deleted = op.Name, false
		s.created = s.created || op.Kind == redo.FileCreate
	}
}

// corrupt is the error for a record the server's parser refuses.
func (p *parser) corrupt(m redo.MTR, w recWalker, reason string) error {
	return &RecordError{Space: w.id.Space, Page: w.id.Page, LSN: m.Start, Record: recordName(w.typ, w.body), Reason: reason}
}

// record files one page record, with the parse-time checks of the server.
func (p *parser) record(m redo.MTR, w *recWalker) error {
	if len(w.rec) > p.pageSize {
		return p.corrupt(m, *w, "record longer than a page")
	}
	switch w.typ {
	case recReserved:
		return p.corrupt(m, *w, "reserved record type")
	case recOption:
		return nil // OPT_PAGE_CHECKSUM is written by debug builds only
	case recFree, recInit:
		if w.same || len(w.body) != 0 {
			return p.corrupt(m, *w, "FREE_PAGE or INIT_PAGE with a payload or without page ids")
		}
		if p.dry && p.reset != nil {
			p.reset[w.id] = m.Start
		}
	case recExtended:
		if len(w.body) == 0 {
			return p.corrupt(m, *w, "empty EXTENDED record")
		}
		if w.body[0] == extTrimPages {
			return p.trim(m, w)
		}
		if p.inject {
			return p.corrupt(m, *w, "injected unknown record ("+faultpoint.FailEnv+"=apply-record)")
		}
	default:
		if len(w.body) == 0 {
			return p.corrupt(m, *w, "empty record")
		}
	}
	if p.deletes {
		if s := p.spaces[w.id.Space]; s != nil && s.deleted {
			return nil
		}
	}
	if p.gone[w.id.Space] {
		return nil
	}
	if w.id.Page == 0 {
		p.pageZero(w)
	}
	if !p.dry {
		p.store(w)
	}
	return nil
}

// pending is one page record of the mini-transaction being parsed.
type pending struct {
	id  redo.PageID
	typ byte
	rec []byte // in the MTR's records: valid while the mini-transaction is parsed
}

// store keeps the record until the mini-transaction ends (storeMtr).
func (p *parser) store(w *recWalker) {
	p.pending = append(p.pending, pending{id: w.id, typ: w.typ, rec: w.rec})
}

// storeMtr files the mini-transaction's records as one group per page, each group
// contiguous in the arena. A FREE_PAGE or INIT_PAGE drops the page's earlier records,
// in this mini-transaction and before.
func (p *parser) storeMtr(m redo.MTR) {
	p.order = p.order[:0]
	for _, r := range p.pending {
		if !slices.Contains(p.order, r.id) {
			p.order = append(p.order, r.id)
		}
	}
	for _, id := range p.order {
		if p.reset[id] > m.Start {
			continue // freed or initialized by a later mini-transaction
		}
		from, kind := 0, byte(0xFF)
		for i, r := range p.pending {
			if r.id == id && (r.typ == recFree || r.typ == recInit) {
				from, kind = i, r.typ
			}
		}
		pl := p.b.pages[id]
		if pl == nil {
			pl = &pageLog{first: -1, last: -1}
			p.b.pages[id] = pl
		}
		switch {
		case kind != 0xFF: // the earlier groups stay in batch.groups, unchained
			pl.first, pl.last, pl.init, pl.freed = -1, -1, kind == recInit, kind == recFree
		case pl.freed && !pl.empty():
			pl.freed = false // records after FREE_PAGE: apply refuses the page
		}
		off := len(p.b.arena)
		for _, r := range p.pending[from:] {
			if r.id == id {
				p.b.arena = append(p.b.arena, r.rec...)
			}
		}
		p.b.chain(pl, group{start: m.Start, len: uint32(m.End - m.Start), off: uint32(off), n: uint32(len(p.b.arena) - off), next: -1})
	}
	p.pending = p.pending[:0]
}

// chain appends g to the page's groups.
func (b *batch) chain(pl *pageLog, g group) {
	i := int32(len(b.groups))
	b.groups = append(b.groups, g)
	if pl.last >= 0 {
		b.groups[pl.last].next = i
	} else {
		pl.first = i
	}
	pl.last = i
}

// pageZero notes the tablespace size and flags a WRITE to page 0 sets (§7.1).
func (p *parser) pageZero(w *recWalker) {
	if w.typ != recWrite {
		return
	}
	at, data := w.writeRange()
	s := p.space(w.id.Space)
	if at <= fspSize && at+len(data) >= fspSize+4 {
		if v := binary.BigEndian.Uint32(data[fspSize-at:]); v != 0 {
			s.recvSize = v
		}
	}
	if at <= fspFlags && at+len(data) >= fspFlags+4 {
		s.flags, s.hasFlags = binary.BigEndian.Uint32(data[fspFlags-at:]), true
	}
}

// trim handles TRIM_PAGES: the undo tablespace is rebuilt from this mini-transaction
// on, so every older record of it is dropped.
func (p *parser) trim(m redo.MTR, w *recWalker) error {
	if len(w.body) != 1 || w.same {
		return p.corrupt(m, *w, "malformed TRIM_PAGES")
	}
	p.dropSpace(w.id.Space)
	p.b.trims = append(p.b.trims, trim{space: w.id.Space, pages: w.id.Page})
	return nil
}

// dropSpace drops the records the batch holds for a tablespace.
func (p *parser) dropSpace(id uint32) {
	for pid := range p.b.pages {
		if pid.Space == id {
			delete(p.b.pages, pid)
		}
	}
	p.pending = slices.DeleteFunc(p.pending, func(r pending) bool { return r.id.Space == id })
}

// FSP header fields on page 0.
const (
	fspSize  = 38 + 8
	fspFlags = 38 + 16
)
