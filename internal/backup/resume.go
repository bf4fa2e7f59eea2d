package backup

import (
	"cmp"
	"context"
	"fmt"

	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/sink"
)

// A resumed backup (an end that is sink.Resumable and holds ranges an interrupted
// attempt stored) keeps those ranges instead of copying them again. The argument
// (docs/repository.md, "Resuming a backup"): a held range was read by an attempt whose
// copy began at checkpoint S; every change below S was on disk before it read the
// range. This copy reads the range again, after its own redo copy began at checkpoint
// C. A page whose LSN is still at most S was not written since S, so the held image
// is the page as it is now, and every later change is in this copy's redo (any change
// below C is flushed by C and would carry an LSN above S). A page with an LSN above S
// may have changed after the attempt read it: it is stored again as a patch (round
// 1), read after C like any page of this copy. The held range then holds, with its
// patches, what a copy starting at C would hold.

// resumedRound is the re-copy round of the pages a resumed copy stores again over a
// held range: before the three-stage copy's own rounds, which read later.
const resumedRound = 1

// resumable returns the end as sink.Resumable, or nil.
func (j *job) resumable() sink.Resumable {
	r, _ := j.sink.(sink.Resumable)
	return r
}

// copyFrom tells a resumable end the LSN the copy begins at and, if the end holds
// ranges of an interrupted attempt, learns from the server's redo log the pages
// changed since that attempt began (resumeChanges).
func (j *job) copyFrom(ctx context.Context, lsn uint64) {
	r := j.resumable()
	if r == nil {
		return
	}
	r.CopyFrom(lsn)
	if since := r.HeldSince(); since > 0 {
		j.resumed = j.resumeChanges(ctx, since, lsn)
	}
}

// resumedChanges is what the redo says changed since an interrupted attempt began.
type resumedChanges struct {
	pages map[uint32][]uint32 // by space, sorted; nil: unknown, the held ranges are read whole
	ops   map[uint32]bool     // spaces whose file the redo creates or deletes: read whole
}

// resumeChanges reads the server's redo log from since (the earliest start of the
// attempts whose ranges are held) to upto (this copy's start). A held page the redo
// does not name did not change in between, so its stored image holds every change
// below upto: only the pages it names need reading again (the redo from upto brings
// every page forward). Without the redo (a MySQL log, one written over since), every
// held page is read again and checked by its LSN.
func (j *job) resumeChanges(ctx context.Context, since, upto uint64) resumedChanges {
	why := ""
	switch {
	case since > upto:
		why = fmt.Sprintf("the interrupted copy began at LSN %d, past this copy's %d", since, upto)
	case !j.redoLog().Parsed():
		why = "the server's redo log is copied, not parsed"
	case faultpoint.Fails("resume-redo"):
		why = "a test asked for the scan"
	}
	var rc resumedChanges
	if why == "" {
		rc.pages, rc.ops, why = j.redoPagesSince(ctx, since, upto)
	}
	if why != "" {
		j.log.Info("resumed backup: the ranges kept are read again whole, and the pages changed since checked by their LSN", "why", why, "since_lsn", since)
		return resumedChanges{}
	}
	j.log.Info("resumed backup: the server's redo log holds everything since the interrupted copy began; only the pages it names are read again",
		"since_lsn", since, "upto_lsn", upto, "pages", pagesIn(rc.pages))
	return rc
}

// holdRanges asks a resumable end what it already holds of ij and, if anything, plans
// ij's segments over the rest: the gaps between held ranges, and from the last one to
// the end of the file.
func (j *job) holdRanges(ij *innoJob, size int64) {
	r := j.resumable()
	if r == nil || ij.checker == nil {
		return
	}
	held := r.Held(ij.src.Rel, ij.space())
	for _, h := range held {
		if h.Off%int64(ij.page) != 0 || h.Len%int64(ij.page) != 0 || h.Off+h.Len > size {
			return // not on page boundaries, or the file shrank: copy it whole
		}
	}
	if len(held) == 0 {
		return
	}
	var segs []segment
	var at int64
	for _, h := range held {
		segs = append(segs, gapSegments(at, h.Off, j.cfg.Segment, int64(ij.page))...)
		segs = append(segs, segment{off: h.Off, len: h.Len, size: h.Len, crc: h.CRC, held: true})
		at = h.Off + h.Len
	}
	ij.segs = append(segs, segment{off: at, len: -1})
	ij.held = held
	j.mu.Lock()
	j.recopy.first = resumedRound // the three-stage copy's rounds come after
	j.mu.Unlock()
}

// patchHeldPages reads again the pages of ij's held ranges that the redo names as
// changed since the interrupted attempt began, and stores them as patches.
func (j *job) patchHeldPages(ctx context.Context, ij *innoJob) error {
	ps := int64(ij.page)
	var pages []uint32
	for _, p := range j.resumed.pages[ij.header.SpaceID] {
		off := int64(p) * ps
		for _, h := range ij.held {
			if off >= h.Off && off < h.Off+h.Len {
				pages = append(pages, p)
				break
			}
		}
	}
	var kept int64
	for _, h := range ij.held {
		kept += h.Len
	}
	f := recopyFile{src: ij.src, copy: cmp.Or(ij.stored, ij.src.Rel), space: ij.header.SpaceID}
	to := func(f recopyFile, _ int, off int64, b []byte) error {
		j.stats.resumePatched.Add(int64(len(b)))
		return j.patchRound(resumedRound, f.copy, off, b)
	}
	n, err := j.recopyFilePages(ctx, f, pages, to)
	j.stats.resumeKept.Add(kept - n*ps)
	return err
}

// gapSegments splits the bytes from off to end into segments of about seg bytes.
func gapSegments(off, end, seg, page int64) []segment {
	seg = max(seg/page*page, page)
	var out []segment
	for ; off < end; off += seg {
		out = append(out, segment{off: off, len: min(seg, end-off)})
	}
	return out
}

// patchHeld stores again, as patches, what the held ranges of a file just finished may
// lack: the pages the redo names as changed since the interrupted attempt began, or,
// without that, the runs holding a page whose LSN is above its range's Since.
func (j *job) patchHeld(ctx context.Context, ij *innoJob) error {
	if len(ij.held) == 0 {
		return nil
	}
	if j.resumed.pages != nil && !j.resumed.ops[ij.header.SpaceID] {
		return j.patchHeldPages(ctx, ij)
	}
	in, err := directio.Open(ij.src.Abs)
	if err != nil {
		return fmt.Errorf("open %s to check the pages kept from the interrupted backup: %w", ij.src.Abs, err)
	}
	defer in.Close()
	buf := directio.AlignedBuffer(recopyRun)
	name := ij.src.Rel
	if ij.stored != "" {
		name = ij.stored
	}
	for _, h := range ij.held {
		for off := h.Off; off < h.Off+h.Len; {
			want := int(min(int64(len(buf)), h.Off+h.Len-off))
			got, err := j.readChunk(ctx, in, ij, buf[:want], off)
			if err != nil {
				return err
			}
			if got == 0 {
				break
			}
			j.prog.Add(int64(got))
			if newerPage(buf[:got], ij.page, h.Since) {
				if err := j.patchRound(resumedRound, name, off, buf[:got]); err != nil {
					return err
				}
				j.stats.resumePatched.Add(int64(got))
			} else {
				j.stats.resumeKept.Add(int64(got))
			}
			off += int64(got)
		}
	}
	return nil
}
