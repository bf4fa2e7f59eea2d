package apply

import (
	"encoding/binary"
	"fmt"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/redo"
)

// pageJob is one page of a batch to roll forward.
type pageJob struct {
	id  redo.PageID
	log *pageLog
	sp  *space
}

// rollPage reads one page (unless the redo builds it), applies the groups newer than
// its FIL_PAGE_LSN and writes it back if any applied. buf is scratch of at least the
// page's physical size. It returns whether the page was written.
func (a *applier) rollPage(j pageJob, arena []byte, buf []byte) (bool, error) {
	pl, sp := j.log, j.sp
	if pl.freed {
		return false, nil // FREE_PAGE alone: the server leaves the page as it is
	}
	if reason := sp.unsupported(); reason != "" {
		return false, a.refuse(j, pl.groups[0], reason)
	}
	frame := buf[:sp.physSize()]
	var pageLSN uint64
	first := arena[pl.groups[0].off:]
	if !pl.init && len(first) > 0 && first[0]&0x70 == recFree {
		return false, a.refuse(j, pl.groups[0], "records after FREE_PAGE without INIT_PAGE")
	}
	if pl.init {
		clear(frame)
	} else {
		if err := sp.readPage(frame, j.id.Page); err != nil {
			return false, err
		}
		if reason := a.checkRead(sp, frame, j.id); reason != "" {
			return false, a.refuse(j, pl.groups[0], reason)
		}
		pageLSN = innodb.PageLSN(frame)
	}
	var applied *group
	for i := range pl.groups {
		g := &pl.groups[i]
		if g.start < pageLSN {
			continue
		}
		if err := applyGroup(frame, arena[g.off:g.off+g.n], sp.flags.ZipSize() != 0); err != nil {
			return false, a.refuse(j, *g, err.Error())
		}
		applied = g
	}
	if applied == nil {
		return false, nil // every group was older: the page is not rewritten
	}
	if sp.flags.ZipSize() != 0 {
		innodb.SealZipPage(frame, j.id.Page, applied.end)
	} else {
		innodb.SealPage(frame, j.id.Space, j.id.Page, sp.flags, applied.end)
	}
	return true, sp.writePage(frame, j.id.Page)
}

// checkRead is the server's test of a page read for recovery: checksum, page id and
// an LSN not in the future. It returns why the page cannot be rolled forward, or "".
func (a *applier) checkRead(sp *space, frame []byte, id redo.PageID) string {
	if innodb.IsZero(frame) {
		return "the page is all zeros but the redo does not build it"
	}
	if sp.encryptedPage(frame, id.Page) {
		return "encrypted page"
	}
	if sp.compressedPage(frame) {
		return "page_compressed page"
	}
	h := innodb.SpaceHeader{SpaceID: id.Space, Flags: sp.flags, CryptData: sp.crypt}
	if err := innodb.NewChecker(h, false).Check(frame, id.Page); err != nil {
		return err.Error()
	}
	if no := innodb.PageNo(frame); no != id.Page {
		return fmt.Sprintf("the page says it is page %d", no)
	}
	if s := binary.BigEndian.Uint32(frame[34:]); s != id.Space {
		return fmt.Sprintf("the page says it is in tablespace %d", s)
	}
	if l := innodb.PageLSN(frame); l > a.end {
		return fmt.Sprintf("FIL_PAGE_LSN %d is past the end of the redo (%d)", l, a.end)
	}
	return ""
}

// encryptedPage tells whether a page is stored encrypted: a nonzero key version in a
// tablespace with encryption metadata (or any full_crc32 page with one).
func (s *space) encryptedPage(frame []byte, no uint32) bool {
	if no == 0 || (s.id == 0 && no == 5) {
		return false
	}
	if s.flags.FullCRC32() {
		return binary.BigEndian.Uint32(frame) != 0
	}
	return s.crypt && binary.BigEndian.Uint32(frame[26:]) != 0
}

// unsupported says why ferry does not write pages of this tablespace, or "".
func (s *space) unsupported() string {
	switch {
	case s.crypt:
		return "the tablespace is encrypted (ferry does not encrypt pages yet)"
	case s.flags.PageCompressed():
		return "the tablespace is page_compressed (ferry does not compress pages yet)"
	}
	return ""
}

// compressedPage tells whether a page is stored page_compressed.
func (s *space) compressedPage(frame []byte) bool {
	if !s.flags.PageCompressed() {
		return false
	}
	t := innodb.PageType(frame)
	if s.flags.FullCRC32() {
		return t&0x8000 != 0
	}
	return t == 34354 || t == 37401
}

// refuse is the error for a page ferry does not roll forward.
func (a *applier) refuse(j pageJob, g group, reason string) error {
	recs := a.arenaOf(g)
	name := "?"
	w := recWalker{recs: recs}
	if w.next() {
		name = recordName(w.typ, w.body)
	}
	return &RecordError{Space: j.id.Space, Page: j.id.Page, LSN: g.start, Record: name, Reason: reason}
}
