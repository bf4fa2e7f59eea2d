package backup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/spool"
	"golang.org/x/sync/errgroup"
)

// The three-stage copy (docs/backup-procedure.md has the argument): while the data
// files are copied, a tracker reads the redo and records every page it touches; then
// the pages changed since the copy began up to the server's newest checkpoint A1 are
// copied again, and only the redo from A1 is kept. More rounds run while the server's
// checkpoint moves on and the rounds shrink. ferry never forces a checkpoint: SET
// GLOBAL innodb_log_checkpoint_now brings the checkpoint to the current LSN within a
// second or two, but then loops, flushing the hot pages again and again, until it
// catches up with an LSN a busy server keeps moving; it cannot be killed, and it needs
// SUPER. Measured three times on the bench server under sysbench oltp_write_only, it
// ran 5, 11 and 19 s and cut the write TPS to a half, a third, and to nothing for
// three seconds. Waiting for the checkpoint to pass the end of the copy gains nothing
// either: the server keeps it about as far behind.
const (
	// maxRounds bounds the re-copy rounds.
	maxRounds = 3
	// keepTarget: another round runs only if the server's checkpoint moved on by more
	// than this since the last round's.
	keepTarget = 16 << 20
	// recopyRun is the most bytes read and patched at once.
	recopyRun = 1 << 20
	// recopyGap: changed pages at most this many pages apart are read in one run
	// (with the unchanged pages between them).
	recopyGap = 4
)

// wantThreeStage tells whether this backup copies changed pages again and keeps only
// a short redo tail, saying why not where it cannot.
func (j *job) wantThreeStage() bool {
	switch {
	case !j.redoLog().Parsed():
		j.log.Info("three-stage copy off: the server's redo log is copied block by block, not parsed, so the backup keeps the whole redo of the copy")
		return false
	case j.mode.wholeRedo() != "":
		j.log.Info("three-stage copy off: " + j.mode.wholeRedo())
		return false
	case j.cfg.FullRedo:
		j.log.Info("three-stage copy off (the whole redo was asked for): the backup keeps the whole redo of the copy")
		return false
	case !j.sink.Caps().Patch:
		j.log.Info("three-stage copy off: this end cannot rewrite pages in place, so the backup keeps the whole redo of the copy", "target", j.sink.Name())
		return false
	}
	return true
}

// recopyStats sums up the re-copy rounds, for logs and the Result.
type recopyStats struct {
	rounds int
	pages  int64
	round  int // the round running, for Sink.Patch
	first  int // rounds before the first re-copy round: a resumed copy's (resume.go)
}

// threeStage runs the re-copy rounds after the data copy and makes the redo copy of
// the last round the backup's.
func (j *job) threeStage(ctx context.Context, fail context.CancelCauseFunc) error {
	cur := j.tails[0] // the tracker opened at START, whose redo the backup keeps so far
	since := cur.t.Start().LSN
	if err := j.drain(ctx); err != nil {
		return err
	}
	ok, roll, why, err := j.worthRecopy(cur)
	switch {
	case err != nil:
		return err
	case !ok && !cur.draining: // a held tracker: its redo is the backup's after all
		j.log.Info("three-stage copy: no re-copy round: " + why)
		return j.rollAndKeep(ctx, cur, fail)
	case !ok && !roll:
		j.log.Info("three-stage copy skipped: " + why + "; the backup keeps the whole redo of the copy")
		return nil
	case !ok:
		j.log.Info("three-stage copy: one re-copy round runs anyway: " + why)
	}
	for round := 1; ; round++ {
		if round > 1 {
			if err := j.drain(ctx); err != nil {
				return err
			}
		}
		t0 := j.clock.Now()
		next, err := j.openTail(ctx, fail, tailRound) // at the server's newest checkpoint
		if err != nil {
			return err
		}
		a := next.t.Start().LSN
		j.recopy.round = j.recopy.first + round
		j.prog.Stage(fmt.Sprintf("backup: re-copy round %d", round))
		n, fellBack, err := j.recopyRound(ctx, cur, a, since)
		if err != nil {
			return err
		}
		j.recopy.rounds, j.recopy.pages = round, j.recopy.pages+n
		since, cur = a, next
		j.log.Info("three-stage copy: pages changed during the copy copied again", "round", round, "checkpoint_lsn", a,
			"pages", n, "took", j.clock.Now().Sub(t0).Round(time.Millisecond), "redo_since_checkpoint", cur.t.Copied()-a)
		// Another round, from the server's newest checkpoint, copies the pages changed
		// during this one. It drops the redo of this round but keeps its own, so it is
		// worth it only while the checkpoint has moved on far enough and the rounds
		// shrink by half at least (after reading every page, the next round, reading
		// only changed pages, is shorter anyway). Under random writes over a large
		// data set a round changes about as many pages as it copies: one round then.
		cp, err := j.checkpoint()
		if err != nil {
			return err
		}
		shrinking := fellBack || 2*int64(cur.pages.Len()) < n
		if round >= maxRounds || cp < a+keepTarget || !shrinking {
			break
		}
	}
	return j.rollAndKeep(ctx, cur, fail)
}

// rollAndKeep rolls the pages cur saw changed forward (rollforward.go), then makes
// cur's redo, from where the roll-forward left it, the backup's.
func (j *job) rollAndKeep(ctx context.Context, cur *tailer, fail context.CancelCauseFunc) error {
	if err := j.rollForward(ctx, cur); err != nil {
		return err
	}
	return j.keep(cur, fail)
}

// drain waits until the end has stored what the copy (or the round before) sent: a
// round's redo is kept from the checkpoint it opens at, so the time its pages would wait
// behind a slow destination's backlog must pass before, not after.
func (j *job) drain(ctx context.Context) error {
	t0 := j.clock.Now()
	if err := j.sink.Drain(ctx); err != nil {
		return fmt.Errorf("wait for %s to store the copy before copying changed pages again: %w", j.sink.Name(), err)
	}
	if d := j.clock.Since(t0); d > time.Second {
		j.log.Info("three-stage copy: waited for the destination to store the copy", "took", d.Round(time.Millisecond))
	}
	return nil
}

// worthRecopy decides whether the first re-copy round pays (recopyEstimate.pays), and
// says why not; roll says that a round runs anyway, for the roll-forward after it
// (rollPays),
// from the copy so far as the job's clock measures it. A tracker that failed (lapped)
// leaves no choice: its redo is not whole, the round falls back to page LSNs.
func (j *job) worthRecopy(cur *tailer) (ok, roll bool, why string, err error) {
	select {
	case <-cur.ran:
		return true, false, "", nil
	default:
	}
	a, err := j.checkpoint()
	if err != nil {
		return false, false, "", err
	}
	start := cur.t.Start().LSN
	e := recopyEstimate{elapsed: j.clock.Now().Sub(j.copyStart), maxRate: j.cfg.MaxRate,
		redo: int64(cur.t.Copied()) - int64(start), dropped: int64(a) - int64(start)}
	j.mu.Lock()
	spaces := map[uint32]bool{} // pages of other tablespaces (created or dropped since) are not read again
	for _, f := range j.files {
		if f.Kind == manifest.KindInnoDB {
			e.copied += f.Size
			spaces[f.SpaceID] = spaces[f.SpaceID] || f.Known
		}
	}
	j.mu.Unlock()
	e.changed = int64(cur.pages.LenWhere(func(id uint32) bool { return spaces[id] })) * int64(j.info.PageSize)
	ok, why = e.pays()
	if !ok {
		j.log.Debug("three-stage copy: the first re-copy round does not pay by the server's checkpoint", "why", why,
			"changed_bytes", e.changed, "redo_dropped", max(e.dropped, 0), "redo_kept_meanwhile_estimate", e.cost())
		if pays, whyNot := e.rollPays(); !pays {
			return false, false, why + "; " + whyNot, nil
		}
		if j.noRollForward() == "" {
			return false, true, why + "; the roll-forward after a round drops the copy's redo", nil
		}
		return false, false, why, nil
	}
	return ok, false, why, nil
}

// rollPays tells whether rolling pages forward pays: it drops the redo but reads the
// changed pages again, so it runs only when there is more than keepTarget of redo to
// drop and the pages to read are at most twice as many bytes. Under random writes over
// a data set larger than the buffer pool (bench/prepare.sh), a copy changes most pages,
// and reading them again took longer than the copy itself.
func rollPays(changed, redo int64) bool { return redo > keepTarget && changed <= 2*redo }

// rollPays tells whether a round run only for the roll-forward after it pays (the
// function rollPays), and also that the redo the server writes while the round reads
// the pages again (cost) is at most half the redo the roll drops: otherwise the roll
// would chase the server, keep as much redo at the end, and make the backup several
// times longer (bench/capped.sh: bulk updates at 17 MB/s of redo, --max-rate 8M). It
// says why not.
func (e recopyEstimate) rollPays() (bool, string) {
	switch {
	case !rollPays(e.changed, e.redo):
		return false, rollWhyNot(e.changed, e.redo)
	case 2*e.cost() > e.redo:
		return false, fmt.Sprintf("rolling pages forward would read again %d MiB of changed pages while the server writes about %d MiB of redo, against the %d MiB it drops",
			e.changed>>20, e.cost()>>20, e.redo>>20)
	}
	return true, ""
}

// rollWhyNot says why rolling pages forward does not pay, for the log.
func rollWhyNot(changed, redo int64) string {
	if redo <= keepTarget {
		return "too little redo to roll pages forward"
	}
	return fmt.Sprintf("rolling pages forward would read again %d MiB of changed pages to drop %d MiB of redo", changed>>20, redo>>20)
}

// recopyEstimate is what the decision on a first re-copy round is made of, measured
// over the copy so far.
type recopyEstimate struct {
	elapsed time.Duration // since the redo copy began
	copied  int64         // bytes of InnoDB files copied
	maxRate int64         // --max-rate (0: none), which paces a round's reads too
	changed int64         // bytes of the pages a round would read again
	redo    int64         // redo the server wrote since the copy began
	dropped int64         // redo from the copy's start to the server's newest checkpoint
}

// cost is the redo the server is expected to write while a round reads the changed
// pages again (at the copy's read rate, or --max-rate if lower): what the backup keeps
// instead of what the round drops.
func (e recopyEstimate) cost() int64 {
	secs := max(e.elapsed.Seconds(), 0.001)
	readRate := float64(e.copied) / secs
	if e.maxRate > 0 {
		readRate = min(readRate, float64(e.maxRate))
	}
	return int64(float64(e.changed) / max(readRate, 1) * (float64(e.redo) / secs))
}

// pays tells whether a round drops more than twice the redo it keeps instead (and
// more than keepTarget), and why not when it does not.
func (e recopyEstimate) pays() (bool, string) {
	switch {
	case e.dropped <= keepTarget:
		return false, "the server's checkpoint has hardly moved since the copy began, so there is little redo to drop"
	case e.dropped <= 2*e.cost():
		return false, "copying again the pages changed during the copy would keep about as much redo as it drops"
	}
	return true, ""
}

// recopyRound retires the redo copy cur at a, the checkpoint the next one starts
// from, and copies again every page it saw changed; if cur was lapped by the server
// (or its page set overflowed), every page whose LSN is above since is copied again
// and fellBack is set.
func (j *job) recopyRound(ctx context.Context, cur *tailer, a, since uint64) (n int64, fellBack bool, err error) {
	err = j.retire(cur, a)
	var lapped *redo.OverwrittenError
	if err != nil && !errors.As(err, &lapped) {
		return 0, false, err
	}
	pages, ok := cur.pages.Take()
	if err == nil && ok {
		j.log.Info("three-stage copy: copying again the pages changed since the last checkpoint", "round", j.recopy.round,
			"from_lsn", since, "checkpoint_lsn", a, "pages", pagesIn(pages))
		n, err = j.recopyPages(ctx, pages, j.patchCopy)
		return n, false, err
	}
	why := "the set of changed pages outgrew its bound"
	switch {
	case errors.Is(err, spool.ErrFull):
		why = "the page tracker's spool filled up (" + err.Error() + ")"
	case err != nil:
		why = "the server overwrote redo the page tracker had not read yet (" + err.Error() + ")"
	}
	j.log.Warn("three-stage copy: "+why+"; reading every page to copy again those changed since the copy began", "since_lsn", since)
	n, err = j.recopyChanged(ctx, since)
	return n, true, err
}

// pagesIn counts the pages of a page set.
func pagesIn(set map[uint32][]uint32) int {
	n := 0
	for _, list := range set {
		n += len(list)
	}
	return n
}

// recopyFile is a tablespace file of the server and where its copy is in the backup.
type recopyFile struct {
	src   srcFile
	copy  string // the copy's name in the backup
	space uint32
}

// recopyTargets maps each tablespace id that has a copy to its files on the server
// now (a tablespace renamed since is read at its new path and written to its copy,
// which the DDL reconciliation renames later). Tablespaces dropped or created since
// the copy have no target: the reconciliation under BLOCK_DDL removes or copies them.
func (j *job) recopyTargets() (map[uint32][]recopyFile, error) {
	copies := map[uint32]map[string]string{} // space id → server-relative name → copy name
	j.mu.Lock()
	for name, f := range j.files {
		if f.Kind == manifest.KindInnoDB && f.Known && f.Stored == "" {
			if copies[f.SpaceID] == nil {
				copies[f.SpaceID] = map[string]string{}
			}
			copies[f.SpaceID][f.Rel] = name
		}
	}
	j.mu.Unlock()
	p, err := j.scan()
	if err != nil {
		return nil, err
	}
	out := map[uint32][]recopyFile{}
	for _, f := range p.InnoDB {
		id, known := uint32(0), f.System
		if !f.System {
			if id, known, err = spaceID(f.Abs, j.info.PageSize); errors.Is(err, os.ErrNotExist) {
				continue
			} else if err != nil {
				return nil, err
			}
		}
		byName := copies[id]
		if !known || len(byName) == 0 {
			continue
		}
		name, ok := byName[f.Rel]
		if !ok && !f.System && len(byName) == 1 {
			for _, n := range byName {
				name, ok = n, true // renamed since it was copied
			}
		}
		if ok {
			out[id] = append(out[id], recopyFile{src: f, copy: name, space: id})
		}
	}
	for _, files := range out {
		sort.Slice(files, func(a, b int) bool { return files[a].src.Base < files[b].src.Base })
	}
	return out, nil
}

// runSink takes the runs of pages read again (pages of ps bytes, the file's physical
// page size): into the backup (patchCopy), or into the roll-forward's scratch copy. It
// is called from several goroutines.
type runSink func(f recopyFile, ps int, off int64, b []byte) error

// patchCopy patches a run read again into the file's copy in the backup.
func (j *job) patchCopy(f recopyFile, _ int, off int64, b []byte) error {
	return j.patch(f.copy, off, b)
}

// recopyPages copies again the given pages of each tablespace, spaces in parallel,
// into to.
func (j *job) recopyPages(ctx context.Context, pages map[uint32][]uint32, to runSink) (int64, error) {
	targets, err := j.recopyTargets()
	if err != nil {
		return 0, err
	}
	var work []func(context.Context) (int64, error)
	for space, list := range pages {
		if files := targets[space]; len(files) > 0 {
			j.prog.AddTotal(int64(len(list)) * int64(j.info.PageSize))
			work = append(work, func(ctx context.Context) (int64, error) { return j.recopySpace(ctx, files, list, to) })
		}
	}
	return j.sumParallel(ctx, work)
}

// sumParallel runs work with cfg.Parallel workers and adds up the pages each copied.
func (j *job) sumParallel(ctx context.Context, work []func(context.Context) (int64, error)) (int64, error) {
	var n atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(j.cfg.Parallel)
	for _, w := range work {
		g.Go(func() error {
			k, err := w(gctx)
			n.Add(k)
			return err
		})
	}
	err := g.Wait()
	return n.Load(), err
}

// recopySpace copies again the pages (sorted) of one tablespace from its files.
func (j *job) recopySpace(ctx context.Context, files []recopyFile, pages []uint32, to runSink) (int64, error) {
	var n int64
	for i, f := range files {
		end := uint32(1<<32 - 1)
		if i+1 < len(files) {
			end = files[i+1].src.Base
		}
		lo := sort.Search(len(pages), func(k int) bool { return pages[k] >= f.src.Base })
		hi := sort.Search(len(pages), func(k int) bool { return pages[k] >= end })
		k, err := j.recopyFilePages(ctx, f, pages[lo:hi], to)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// recopyFilePages reads the pages (absolute page numbers of the tablespace) in runs of
// neighbours, validates them as the copy does and patches them into the copy. Pages
// past the file's end (freed since) are skipped.
func (j *job) recopyFilePages(ctx context.Context, f recopyFile, pages []uint32, to runSink) (int64, error) {
	if len(pages) == 0 {
		return 0, nil
	}
	ij, in, err := j.openRecopy(f)
	if err != nil || in == nil {
		return 0, err
	}
	defer in.Close()
	ps := int64(ij.page)
	// Runs are read whole, unchanged pages between changed ones included, and aligned
	// for O_DIRECT: a page read after the checkpoint is a valid copy of it whether it
	// changed or not.
	unit := max(ps, directio.Align) / ps // pages per aligned unit
	buf := directio.AlignedBuffer(recopyRun)
	var n int64
	maxPages := int64(recopyRun) / ps
	for len(pages) > 0 {
		first := int64(pages[0]-f.src.Base) / unit * unit
		k := 1
		for k < len(pages) && int64(pages[k]-f.src.Base) < first+maxPages &&
			int64(pages[k]-pages[k-1]) <= max(unit, recopyGap) {
			k++
		}
		last := int64(pages[k-1] - f.src.Base)
		length := min((last/unit+1)*unit-first, maxPages) * ps
		pages = pages[k:]
		got, err := j.readChunk(ctx, in, ij, buf[:length], first*ps)
		if err != nil {
			return n, err
		}
		if got == 0 {
			break // past the end of the file
		}
		if err := to(f, int(ps), first*ps, buf[:got]); err != nil {
			return n, err
		}
		j.prog.Add(int64(got))
		n += int64(got) / ps
	}
	k, err := j.matchSize(ctx, in, ij, f, buf, to)
	return n + k, err
}

// matchSize makes a copy as long as the server's file now, by copying the file's last
// page again: InnoDB extends a tablespace file (and logs only its new size, in page 0,
// which the re-copy brought over) before it initializes the new pages, and recovery
// refuses a file shorter than page 0 says ("Unable to apply log to corrupted page").
// The pages between the copy's old end and the last one stay holes, which read as zeros
// as they do on the server until a page is initialized there (then it is in the set).
func (j *job) matchSize(ctx context.Context, in *directio.File, ij *innoJob, f recopyFile, buf []byte, to runSink) (int64, error) {
	size, err := in.Size()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", ij.src.Abs, err)
	}
	ps := int64(ij.page)
	size -= size % ps
	j.mu.Lock()
	have := j.files[f.copy].Size
	j.mu.Unlock()
	if size <= have {
		return 0, nil
	}
	unit := max(ps, directio.Align)
	off := (size - ps) / unit * unit
	got, err := j.readChunk(ctx, in, ij, buf[:unit], off)
	if err != nil || got == 0 {
		return 0, err
	}
	return int64(got) / ps, to(f, int(ps), off, buf[:got])
}

// openRecopy opens a server file for re-reading pages, with its page checker. If the
// file is gone or no longer holds the tablespace (renamed or dropped by DDL since the
// targets were listed), it returns a nil file and marks the tablespace lost: the DDL
// reconciliation then copies it whole under BLOCK_DDL, as one created during the backup.
func (j *job) openRecopy(f recopyFile) (*innoJob, *directio.File, error) {
	in, err := directio.Open(f.src.Abs)
	if errors.Is(err, os.ErrNotExist) {
		j.loseSpace(f.space)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	ij := &innoJob{src: f.src, page: j.info.PageSize}
	if err := j.readHeader(in, ij); err != nil {
		in.Close()
		return nil, nil, err
	}
	if ij.checker == nil || (!f.src.System && ij.header.SpaceID != f.space) {
		in.Close()
		j.loseSpace(f.space)
		return nil, nil, nil
	}
	return ij, in, nil
}

// loseSpace records a tablespace whose pages could not be copied again.
func (j *job) loseSpace(id uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lostSpaces == nil {
		j.lostSpaces = map[uint32]bool{}
	}
	j.lostSpaces[id] = true
}

// recopyChanged is the fallback when the changed pages are not known: it reads every
// page of every tablespace with a copy and copies again each run holding a page whose
// FIL_PAGE_LSN is above since (a page with a lower LSN has not changed since the copy
// began, so its copy is current).
func (j *job) recopyChanged(ctx context.Context, since uint64) (int64, error) {
	targets, err := j.recopyTargets()
	if err != nil {
		return 0, err
	}
	var work []func(context.Context) (int64, error)
	for _, files := range targets {
		for _, f := range files {
			j.prog.AddTotal(f.src.Size)
			work = append(work, func(ctx context.Context) (int64, error) { return j.recopyIfNewer(ctx, f, since) })
		}
	}
	return j.sumParallel(ctx, work)
}

// recopyIfNewer reads one file run by run and patches the runs holding a page newer
// than since.
func (j *job) recopyIfNewer(ctx context.Context, f recopyFile, since uint64) (int64, error) {
	ij, in, err := j.openRecopy(f)
	if err != nil || in == nil {
		return 0, err
	}
	defer in.Close()
	buf := directio.AlignedBuffer(recopyRun)
	var n int64
	for off := int64(0); ; {
		got, err := j.readChunk(ctx, in, ij, buf, off)
		if err != nil {
			return n, err
		}
		if got == 0 {
			k, err := j.matchSize(ctx, in, ij, f, buf, j.patchCopy)
			return n + k, err
		}
		j.prog.Add(int64(got))
		if newerPage(buf[:got], ij.page, since) {
			if err := j.patch(f.copy, off, buf[:got]); err != nil {
				return n, err
			}
			n += int64(got / ij.page)
		}
		off += int64(got)
	}
}

// newerPage tells whether a page of b carries an LSN above since (FIL_PAGE_LSN, bytes
// 16-23 of the page header, in the clear in compressed and encrypted pages too).
func newerPage(b []byte, ps int, since uint64) bool {
	for i := 0; i+ps <= len(b); i += ps {
		if binary.BigEndian.Uint64(b[i+16:]) > since {
			return true
		}
	}
	return false
}

// patch rewrites b at off of a copy in the backup and keeps the copy's size and
// CRC-32C up to date from the CRC of what b replaced (an end that stores patches apart
// keeps the CRC of the bytes first written, extended with zeros to the new size).
func (j *job) patch(name string, off int64, b []byte) error {
	return j.patchRound(j.recopy.round, name, off, b)
}

// patchRound is patch in the given re-copy round.
func (j *job) patchRound(round int, name string, off int64, b []byte) error {
	old, err := j.sink.Patch(round, name, off, b)
	if err != nil {
		return fmt.Errorf("copy pages of %s again: %w", name, err)
	}
	n := int64(len(b))
	j.mu.Lock()
	defer j.mu.Unlock()
	f := j.files[name]
	if end := off + n; end > f.Size {
		f.CRC, f.Size = checksum.Extend(f.CRC, end-f.Size), end
	}
	if !j.sink.Caps().PatchApart {
		f.CRC = checksum.Replace(f.CRC, f.Size, off, n, old, checksum.Sum(b))
	}
	j.files[name] = f
	return nil
}
