package apply

import (
	"encoding/binary"
	"fmt"

	"github.com/ferry-backup/ferry/internal/faultpoint"
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
// its FIL_PAGE_LSN and writes it back if any applied. buf is scratch of at least twice
// the page's physical size. It returns whether the page was written.
func (a *applier) rollPage(j pageJob, b *batch, buf []byte) (bool, error) {
	pl, sp := j.log, j.sp
	if pl.freed {
		// FREE_PAGE alone: the server leaves the page as it is, except in a
		// page_compressed tablespace, where it punches the page out of the file.
		if sp.flags.PageCompressed() {
			return true, sp.punch(j.id.Page)
		}
		return false, nil
	}
	if reason := sp.unsupported(); reason != "" && j.id.Page != 0 { // page 0 is never encrypted nor compressed
		return false, a.refuse(j, *b.group(pl.first), reason)
	}
	frame, out := buf[:sp.physSize()], buf[sp.physSize():2*sp.physSize()]
	pageLSN, err := a.readForRoll(j, b, frame)
	if err != nil {
		return false, err
	}
	var applied *group
	for i := pl.first; i >= 0; i = b.group(i).next {
		g := b.group(i)
		if g.start < pageLSN {
			continue
		}
		if err := applyGroup(frame, b.arena[g.off:g.off+g.n], sp.flags.ZipSize() != 0); err != nil {
			return false, a.refuse(j, *g, err.Error())
		}
		applied = g
	}
	if applied == nil {
		return false, nil // every group was older: the page is not rewritten
	}
	return true, a.writeRolled(j, frame, out, applied.end())
}

// readForRoll puts the page as recovery starts from into frame: zeros if its log starts
// with INIT_PAGE, else the page read, decrypted, decompressed and checked. It returns
// the page's FIL_PAGE_LSN (0 for a built page).
func (a *applier) readForRoll(j pageJob, b *batch, frame []byte) (uint64, error) {
	pl, sp := j.log, j.sp
	g0 := *b.group(pl.first)
	if first := b.arena[g0.off:]; !pl.init && len(first) > 0 && first[0]&0x70 == recFree {
		return 0, a.refuse(j, g0, "records after FREE_PAGE without INIT_PAGE")
	}
	if pl.init {
		clear(frame)
		return 0, nil
	}
	if err := sp.readPage(frame, j.id.Page); err != nil {
		return 0, err
	}
	if innodb.IsZero(frame) {
		return 0, a.refuse(j, g0, "the page is all zeros but the redo does not build it")
	}
	if sp.codec != nil {
		if a.injectDecrypt && sp.codec.Crypt != nil && sp.codec.Crypt.Encrypted(frame, j.id.Page) {
			return 0, a.refuse(j, g0, "injected decryption failure ("+faultpoint.FailEnv+"=apply-decrypt)")
		}
		if _, err := sp.codec.Decode(frame, frame, j.id.Page); err != nil {
			return 0, a.refuse(j, g0, err.Error())
		}
	}
	if reason := a.checkRead(sp, frame, j.id); reason != "" {
		return 0, a.refuse(j, g0, reason)
	}
	return innodb.PageLSN(frame), nil
}

// writeRolled sets the rolled page's LSN and the fields the server computes when it
// writes a page, encrypts and compresses it as the tablespace wants (into out), and
// writes it.
func (a *applier) writeRolled(j pageJob, frame, out []byte, lsn uint64) error {
	sp := j.sp
	if sp.flags.ZipSize() != 0 {
		innodb.SealZipPage(frame, j.id.Page, lsn)
	} else {
		innodb.SealPage(frame, j.id.Space, j.id.Page, sp.flags, lsn)
	}
	if sp.codec != nil {
		if _, err := sp.codec.Encode(out, frame, j.id.Page); err != nil {
			return &RecordError{Space: j.id.Space, Page: j.id.Page, LSN: lsn, Record: "(write)", Reason: err.Error()}
		}
		frame = out
	}
	return sp.writePage(frame, j.id.Page)
}

// checkRead is the server's test of a page read for recovery: checksum, page id and
// an LSN not in the future. It returns why the page cannot be rolled forward, or "".
func (a *applier) checkRead(sp *space, frame []byte, id redo.PageID) string {
	h := innodb.SpaceHeader{SpaceID: id.Space, Flags: sp.flags}
	if err := innodb.NewChecker(h, false).Check(frame, id.Page); err != nil {
		return err.Error()
	}
	if no := innodb.PageNo(frame); no != id.Page {
		return fmt.Sprintf("the page says it is page %d", no)
	}
	if s := binary.BigEndian.Uint32(frame[34:]); s != id.Space {
		return fmt.Sprintf("the page says it is in tablespace %d", s)
	}
	if l := innodb.PageLSN(frame); l > a.end && !a.cfg.Newer {
		return fmt.Sprintf("FIL_PAGE_LSN %d is past the end of the redo (%d)", l, a.end)
	}
	return ""
}

// unsupported says why ferry does not write pages of this tablespace, or "".
func (s *space) unsupported() string {
	switch {
	case s.crypt && s.codec == nil:
		return "the tablespace is encrypted and no key file was given"
	case s.flags.PageCompressed() && s.codec == nil:
		return "the tablespace is page_compressed and its codec is not set up"
	}
	return ""
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
