package backup

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/diskspace"
	"github.com/ferry-backup/ferry/internal/redo"
)

// The roll-forward ends the three-stage copy (docs/backup-procedure.md): the last
// round's redo copy runs from the server's checkpoint A, which stays far behind under
// load. At an LSN L near the server's current one, ferry reads again every page that
// copy saw changed since A, rolls each forward to L with ferry's own redo apply (a
// scratch copy of those pages and the redo from A to L, on local disk), and patches
// them into the backup. Every page of the backup then holds every change below L, so
// the backup's log starts at a checkpoint just below L (redo.CheckpointLog) instead of
// at A: it keeps the redo written during the roll-forward and the locks, not the
// server's checkpoint lag. Anything ferry cannot apply (DDL since A, encrypted or
// unsupported pages) leaves the backup as the round left it, keeping the redo from A;
// the log says why.

// rolled is what a roll-forward did, for the manifest and the logs.
type rolled struct {
	lsn   uint64 // L: the backup's pages hold every change below it
	cp    uint64 // the checkpoint of the backup's log, just below L
	pages int64
}

// rollRun is a run of pages read again, in the scratch copy, to patch into the backup.
type rollRun struct {
	f       recopyFile
	off     int64
	n       int
	scratch string
}

// rollForward rolls the pages cur saw changed forward to where the server is now and
// makes the backup's log start there. It is called with cur not drained yet (the last
// round's copy); it returns an error only for what fails the whole backup.
func (j *job) rollForward(ctx context.Context, cur *tailer) error {
	if why := j.noRollForward(); why != "" {
		j.log.Info("three-stage copy: no roll-forward: "+why+"; the backup keeps the redo from the server's checkpoint", "checkpoint_lsn", cur.t.Start().LSN)
		return nil
	}
	t0 := j.clock.Now()
	j.prog.Stage("backup: rolling changed pages forward")
	removeStaleScratch(j.scratchRoot())
	dir, err := os.MkdirTemp(j.scratchRoot(), fmt.Sprintf("%s%d-", scratchPrefix, os.Getpid()))
	if err != nil {
		return fmt.Errorf("create the roll-forward's scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	a := cur.t.Start().LSN
	data, err := apply.ParseDataFilePath(cmp.Or(j.info.Vars["innodb_data_file_path"], "ibdata1:12M:autoextend"), j.info.PageSize)
	if err != nil {
		j.log.Info("three-stage copy: no roll-forward: "+err.Error()+"; the backup keeps the redo from the server's checkpoint", "checkpoint_lsn", a)
		return nil
	}
	sc := &scratch{dir: dir, data: data}
	l, why, err := j.readPasses(ctx, cur, sc)
	if err != nil {
		return err
	}
	if why != "" {
		j.log.Info("three-stage copy: no roll-forward: "+why+"; the backup keeps the redo from the server's checkpoint", "checkpoint_lsn", a)
		return nil
	}
	r, err := j.rollTo(ctx, cur, sc, a, l)
	if err != nil || r == nil {
		return err
	}
	j.rolled = r
	j.log.Info("three-stage copy: pages rolled forward by ferry's redo apply; the backup keeps the redo from just below their LSN",
		"checkpoint_lsn", a, "rolled_to_lsn", r.lsn, "log_checkpoint_lsn", r.cp, "redo_applied", r.lsn-a, "pages", r.pages, "passes", sc.passes, "top_ups", sc.topUps,
		"took", j.clock.Since(t0).Round(time.Millisecond))
	return nil
}

// Read passes of the roll-forward: each reads again the pages changed since the one
// before, until a pass reads few pages or no fewer than half the pages of the one
// before.
const (
	maxRollPasses = 4
	fewPages      = 256
)

// scratch is the roll-forward's copy of the pages read again, on local disk.
type scratch struct {
	dir    string
	data   []apply.DataFile // the system tablespace's files (innodb_data_file_path)
	mu     sync.Mutex
	runs   []rollRun
	pages  int64
	passes int
	topUps int
	// have is where the scratch copy holds each page it read: once rolled forward,
	// such a page may be newer than the server's file, so it is never read again.
	have map[redo.PageID]rollRun
	// last is the page set the last pass or top-up took: it may hold pages changed
	// after the LSN that pass stopped at, which the next top-up rolls on and patches.
	last map[uint32][]uint32
}

// add notes the pages of a run of the scratch copy (sc.mu held).
func (sc *scratch) add(f recopyFile, ps int, off int64, n int, path string) {
	if sc.have == nil {
		sc.have = map[redo.PageID]rollRun{}
	}
	for o := off; o+int64(ps) <= off+int64(n); o += int64(ps) {
		id := redo.PageID{Space: f.space, Page: f.src.Base + uint32(o/int64(ps))}
		sc.have[id] = rollRun{f: f, off: o, n: ps, scratch: path}
	}
}

// readPasses reads the pages cur saw changed into sc, pass after pass, and returns
// L: every page changed by a mini-transaction below it is in sc. why says why there
// is no roll-forward after all.
func (j *job) readPasses(ctx context.Context, cur *tailer, sc *scratch) (l uint64, why string, err error) {
	a, prev := cur.t.Start().LSN, 0
	for {
		now, _, err := j.srv.LSNs(ctx) // the flushed LSN, which the copy reaches
		if err != nil {
			return 0, "", err
		}
		if err := cur.t.WaitCopied(ctx, now); err != nil {
			if ctx.Err() != nil {
				return 0, "", err
			}
			return 0, "the redo copy did not reach the server's LSN (" + err.Error() + ")", nil
		}
		l = cur.t.Copied() // the pages of every mini-transaction below l are in cur.pages
		pages, ok := cur.pages.Take()
		if !ok {
			return 0, "the set of changed pages outgrew its bound", nil
		}
		n := pagesIn(pages)
		if why, err := j.uncopied(cur, pages, l); why != "" || err != nil {
			return 0, why, err
		}
		// After a round, the redo since its checkpoint may be short: worth dropping if
		// more than a top-up's worth, and the pages few enough.
		if changed := int64(n) * int64(j.info.PageSize); sc.passes == 0 && (l-a <= topUpMin || changed > 2*int64(l-a)) {
			return 0, rollWhyNot(changed, int64(l-a)), nil
		}
		if why := j.checkScratchSpace(int(sc.pages)+n, int64(redo.StartOffset)+int64(l-a)); why != "" {
			return 0, why, nil
		}
		sc.last = pages
		k, err := j.readIntoScratch(ctx, sc, pages)
		if err != nil {
			if ctx.Err() != nil {
				return 0, "", err
			}
			return 0, err.Error(), nil
		}
		sc.pages += k
		sc.passes++
		if sc.passes >= maxRollPasses || n <= fewPages || (sc.passes > 1 && 2*n > prev) {
			return l, "", nil
		}
		prev = n
	}
}

// noRollForward says why this backup does not roll pages forward, or "".
func (j *job) noRollForward() string {
	switch {
	case j.info.EncryptsLog():
		return "the server encrypts its redo log (innodb_encrypt_log=ON), and ferry writes the backup's log start unencrypted only"
	case j.cfg.Filter != nil:
		return "a partial backup holds only some tablespaces, and the redo names all of them"
	case !strings.Contains(j.info.Vars["innodb_checksum_algorithm"], "crc32"):
		return "innodb_checksum_algorithm=" + j.info.Vars["innodb_checksum_algorithm"] + " (ferry writes crc32 checksums)"
	}
	return ""
}

// scratchPrefix starts the name of a roll-forward's scratch directory, followed by
// the pid of the ferry that made it.
const scratchPrefix = "ferry-rollforward-"

// removeStaleScratch removes the scratch directories in root left by a ferry that was
// killed (SIGKILL leaves no chance to remove them): those whose pid is no longer a
// running process.
func removeStaleScratch(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), scratchPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if !ok || !e.IsDir() || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// checkScratchSpace says why the scratch copy does not fit the spool's directory, or "".
func (j *job) checkScratchSpace(pages int, logBytes int64) string {
	need := logBytes + int64(pages)*int64(j.info.PageSize)*2 + 64<<20 // runs read neighbours too
	free, err := diskspace.Free(j.scratchRoot())
	switch {
	case err != nil:
		return err.Error()
	case free < need:
		return fmt.Sprintf("%s has %d MiB free, and the scratch copy needs about %d MiB", j.scratchRoot(), free>>20, need>>20)
	}
	return ""
}

// scratchRoot is where the roll-forward's scratch copy goes: the spool's directory.
func (j *job) scratchRoot() string { return cmp.Or(j.cfg.Spool.Dir, os.TempDir()) }

// rollTo takes the redo from a to l out of cur's spool into the scratch copy, applies
// it there and patches the pages into the backup. If ferry does not apply that redo,
// the backup keeps it: cur's log starts with it again, and nil is returned.
func (j *job) rollTo(ctx context.Context, cur *tailer, sc *scratch, a, l uint64) (*rolled, error) {
	logBytes := int64(redo.StartOffset) + int64(l-a)
	if h := cur.spool.Held(); h < logBytes {
		j.log.Info("three-stage copy: no roll-forward: the redo copy's spool no longer holds the redo from the checkpoint", "held", h, "want", logBytes)
		return nil, nil
	}
	logf, err := os.OpenFile(filepath.Join(sc.dir, "ib_logfile0"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := cur.spool.DrainN(logf, logBytes, 1<<20); err != nil {
		logf.Close()
		return nil, fmt.Errorf("take the redo below LSN %d from the spool: %w", l, err)
	}
	// From here on the spool no longer holds the redo from a: if it is not applied,
	// the backup's log starts with this file again.
	if _, err := apply.Dir(ctx, j.applyConfig(sc)); err != nil {
		if ctx.Err() != nil {
			logf.Close()
			return nil, err
		}
		j.log.Warn("three-stage copy: pages not rolled forward: "+err.Error()+"; the backup keeps the redo from the server's checkpoint", "checkpoint_lsn", a)
		if _, err := logf.Seek(0, io.SeekStart); err != nil {
			logf.Close()
			return nil, err
		}
		cur.head, cur.headFile = io.LimitReader(logf, logBytes), logf
		return nil, nil
	}
	logf.Close()
	if err := j.patchRuns(sc.runs); err != nil {
		return nil, err
	}
	for step := l - a; sc.topUps < maxTopUps; {
		next, kept, err := j.topUp(ctx, cur, sc, l, step)
		switch {
		case err != nil:
			return nil, err
		case kept != nil: // the redo the top-up took from the spool stays in the backup
			return j.rolledAt(cur, sc, l, kept)
		case next == l:
			return j.rolledAt(cur, sc, l, nil)
		}
		step, l = next-l, next
	}
	return j.rolledAt(cur, sc, l, nil)
}

// rolledAt makes cur's log start at a checkpoint just below l, followed by more (the
// redo from l a top-up took from the spool without applying it), then the spool.
func (j *job) rolledAt(cur *tailer, sc *scratch, l uint64, more io.Reader) (*rolled, error) {
	head, cp, err := redo.CheckpointLog(l, cur.namesBelow(l), "Backup ferry "+j.cfg.Version)
	if err != nil {
		return nil, err
	}
	cur.head = bytes.NewReader(head)
	if more != nil {
		cur.head = io.MultiReader(cur.head, more)
	}
	return &rolled{lsn: l, cp: cp, pages: sc.pages}, nil
}

// Top-ups: after the roll-forward to L, the redo the server wrote meanwhile is applied
// too, at most maxTopUps times, while there is more than topUpMin of it and it is at
// most half the redo the step before applied: each then takes half the time of the one
// before or less. More means the server writes redo about as fast as the apply goes
// (a bulk-update load on few CPUs), and topping up would chase it for minutes, its
// pages held in memory, to keep hardly less redo in the end (bench/capped.sh).
const (
	maxTopUps = 3
	topUpMin  = 4 << 20
)

// topUp rolls the scratch copy on from l to where the server's redo copy is now and
// patches the pages that changed into the backup, returning the new L: l itself when
// there was too little redo to bother, or a page it would need has no copy. A page
// changed since l that the scratch copy does not hold is read from the server: it did
// not change in [a, l), and every change below a was on disk, so its image holds every
// change below l. One it holds (rolled to l, perhaps newer than the server's file) is
// not read again. If the apply refuses the redo from l, that redo, taken out of the
// spool, is returned as kept, for the backup's log.
func (j *job) topUp(ctx context.Context, cur *tailer, sc *scratch, l, step uint64) (next uint64, kept io.Reader, err error) {
	now, _, err := j.srv.LSNs(ctx)
	if err != nil || now < l+topUpMin {
		return l, nil, err
	}
	if !converges(step, now-l) {
		j.log.Info("three-stage copy: no roll-forward top-up: the server wrote more redo during the last apply than half of what it applied, so topping up would not catch up with it; the backup keeps the redo from there",
			"from_lsn", l, "applied", step, "written_meanwhile", now-l)
		return l, nil, nil
	}
	if err := cur.t.WaitCopied(ctx, now); err != nil {
		return l, nil, err
	}
	l2 := cur.t.Copied()
	pages, ok := cur.pages.Take()
	if !ok {
		return l, nil, nil
	}
	if why, err := j.uncopied(cur, pages, l2); why != "" || err != nil {
		return l, nil, err
	}
	if cur.spool.Held() < int64(l2-l) {
		return l, nil, nil
	}
	sc.topUps++
	changed, err := j.readNewIntoScratch(ctx, sc, pages, sc.last)
	sc.last = pages
	if err != nil || changed == nil {
		return l, nil, err
	}
	logPath := filepath.Join(sc.dir, "ib_logfile0")
	os.Remove(logPath) // the empty log the apply before left
	logf, err := os.OpenFile(logPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return l, nil, err
	}
	if _, err := logf.Write(redo.BackupHeader(redo.Header{Format: redo.FormatPhys}, redo.Checkpoint{LSN: l, EndLSN: l}, "ferry roll-forward")); err != nil {
		logf.Close()
		return l, nil, err
	}
	if err := cur.spool.DrainN(logf, int64(l2-l), 1<<20); err != nil {
		logf.Close()
		return l, nil, fmt.Errorf("take the redo below LSN %d from the spool: %w", l2, err)
	}
	if _, err := apply.Dir(ctx, j.applyConfig(sc)); err != nil {
		if ctx.Err() != nil {
			logf.Close()
			return l, nil, err
		}
		j.log.Info("three-stage copy: roll-forward top-up not applied: "+err.Error(), "from_lsn", l)
		if _, err := logf.Seek(redo.StartOffset, io.SeekStart); err != nil {
			logf.Close()
			return l, nil, err
		}
		cur.headFile = logf
		return l, io.LimitReader(logf, int64(l2-l)), nil
	}
	logf.Close()
	return l2, nil, j.patchRuns(changed)
}

// converges tells whether a top-up of next bytes of redo, after a step that applied
// step bytes, is worth it: at most half as long.
func converges(step, next uint64) bool { return 2*next <= step }

// readNewIntoScratch reads the pages of pages the scratch copy does not hold yet into
// it (page by page out of each run: a run's other pages may be ones it holds, rolled
// forward) and returns where it holds every page of pages and of last (those the top-up
// rolls on), to patch into the backup once rolled.
func (j *job) readNewIntoScratch(ctx context.Context, sc *scratch, pages, last map[uint32][]uint32) ([]rollRun, error) {
	toRead := map[uint32][]uint32{}
	want := map[redo.PageID]bool{}
	for _, set := range []map[uint32][]uint32{pages, last} {
		for id, list := range set {
			for _, no := range list {
				pid := redo.PageID{Space: id, Page: no}
				if _, held := sc.have[pid]; !held && !want[pid] {
					toRead[id] = append(toRead[id], no)
				}
				want[pid] = true
			}
		}
	}
	for _, list := range toRead {
		sort.Slice(list, func(a, b int) bool { return list[a] < list[b] })
	}
	to := func(f recopyFile, ps int, off int64, b []byte) error {
		path := filepath.Join(sc.dir, filepath.FromSlash(f.src.Rel))
		sc.mu.Lock()
		defer sc.mu.Unlock()
		for o := off; o+int64(ps) <= off+int64(len(b)); o += int64(ps) {
			pid := redo.PageID{Space: f.space, Page: f.src.Base + uint32(o/int64(ps))}
			if _, held := sc.have[pid]; held || !want[pid] {
				continue
			}
			if err := writeScratch(path, o, b[o-off:o-off+int64(ps)]); err != nil {
				return err
			}
			sc.add(f, ps, o, ps, path)
		}
		return nil
	}
	n, err := j.recopyPages(ctx, toRead, to)
	sc.pages += n
	if err != nil {
		return nil, err
	}
	if j.lostAny() { // copied whole under BLOCK_DDL: its changes below l stay in the redo
		return nil, nil
	}
	var changed []rollRun
	for pid := range want {
		if r, ok := sc.have[pid]; ok {
			changed = append(changed, r)
		}
	}
	return changed, nil
}

// readIntoScratch reads the pages again, in runs as a re-copy round does, into files
// of the scratch directory named as in the datadir, with each tablespace's page 0
// (which the apply reads for the tablespace's id and flags) and the system
// tablespace's other files (empty).
func (j *job) readIntoScratch(ctx context.Context, sc *scratch, pages map[uint32][]uint32) (int64, error) {
	if _, ok := pages[0]; !ok {
		pages[0] = nil // the apply opens the system tablespace by its page 0
	}
	for id, list := range pages {
		if len(list) == 0 || list[0] != 0 {
			pages[id] = append([]uint32{0}, list...)
		}
	}
	for _, d := range sc.data {
		if err := touch(filepath.Join(sc.dir, d.Name)); err != nil {
			return 0, err
		}
	}
	to := func(f recopyFile, ps int, off int64, b []byte) error {
		path := filepath.Join(sc.dir, filepath.FromSlash(f.src.Rel))
		if err := writeScratch(path, off, b); err != nil {
			return err
		}
		sc.mu.Lock()
		defer sc.mu.Unlock()
		sc.runs = append(sc.runs, rollRun{f: f, off: off, n: len(b), scratch: path})
		sc.add(f, ps, off, len(b), path)
		return nil
	}
	n, err := j.recopyPages(ctx, pages, to)
	if err != nil {
		return n, err
	}
	if j.lostAny() {
		return n, errors.New("tablespaces were renamed or dropped during the copy")
	}
	return n, nil
}

// lostAny tells whether a tablespace could not be read again (renamed or dropped since
// it was copied): it is copied whole under BLOCK_DDL, later than any L, so its changes
// must stay in the backup's redo.
func (j *job) lostAny() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.lostSpaces) > 0
}

// uncopied says why a tablespace the redo below l changes has no copy to roll forward
// (created during the backup, or its page 0 was not on disk yet when it was copied: it
// is copied whole under BLOCK_DDL, later than l), or "". Tablespaces dropped below l and
// the server's intermediate tables (#sql...) are not asked for.
func (j *job) uncopied(cur *tailer, pages map[uint32][]uint32, l uint64) (string, error) {
	targets, err := j.recopyTargets()
	if err != nil {
		return "", err
	}
	names := map[uint32]string{}
	for _, f := range cur.namesBelow(l) {
		names[f.SpaceID] = f.Name
	}
	dropped := map[uint32]bool{}
	for _, op := range cur.opsBelow(l) {
		dropped[op.SpaceID] = dropped[op.SpaceID] || op.Kind == redo.FileDelete
	}
	for id := range pages {
		name := names[id]
		if len(targets[id]) > 0 || dropped[id] || strings.HasPrefix(filepath.Base(name), "#sql") {
			continue
		}
		return fmt.Sprintf("tablespace %d (%s) has no copy to roll forward (created during the backup, or its first page was not yet on disk when it was copied): it is copied whole under BLOCK_DDL", id, cmp.Or(name, "name unknown")), nil
	}
	return j.createdBelow(cur, l), nil
}

// createdBelow says why a tablespace created during the backup, below l, stops the
// roll-forward, or "". The DDL reconciliation under BLOCK_DDL copies such a tablespace
// whole again (reconcileDDL), from the server's files, which hold only the changes
// below the server's checkpoint: the redo from there must stay in the backup, and a
// log starting at l would drop it (a table created and filled after the server's last
// checkpoint came back with its unflushed pages as zeros).
func (j *job) createdBelow(cur *tailer, l uint64) string {
	ops := append(append([]redo.FileOp(nil), j.retiredOps...), cur.opsBelow(l)...)
	e := summarize(ops)
	for _, op := range ops {
		if op.Kind == redo.FileCreate && !e.deleted[op.SpaceID] {
			return fmt.Sprintf("tablespace %d (%s) was created during the backup: it is copied whole under BLOCK_DDL and needs the redo from the checkpoint", op.SpaceID, op.Name)
		}
	}
	return ""
}

// touch creates an empty file and its directory.
func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// writeScratch writes b at off of the scratch file path, creating it.
func writeScratch(path string, off int64, b []byte) error {
	if err := touch(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return fmt.Errorf("write the roll-forward's scratch copy: %w", err)
	}
	return f.Close()
}

// applyConfig is the redo apply's configuration for the scratch copy sc.
func (j *job) applyConfig(sc *scratch) apply.Config {
	level, _ := strconv.Atoi(j.info.Vars["innodb_compression_level"]) // 0: the server's default
	return apply.Config{Dir: sc.dir, DataFiles: sc.data, PageSize: j.info.PageSize, CompressionLevel: level,
		EncryptTables: j.info.Vars["innodb_encrypt_tables"] != "" && j.info.Vars["innodb_encrypt_tables"] != "OFF",
		Newer:         true, Log: j.log}
}

// patchRuns patches the runs, as rolled forward in the scratch copy, into the backup,
// as a re-copy round of its own (an end storing patches apart applies a later round's
// over an earlier one's). Runs read in several passes may overlap: they are merged
// first, since the patches of one round must not overlap.
func (j *job) patchRuns(runs []rollRun) error {
	sort.Slice(runs, func(a, b int) bool {
		if runs[a].f.copy != runs[b].f.copy {
			return runs[a].f.copy < runs[b].f.copy
		}
		return runs[a].off < runs[b].off
	})
	var merged []rollRun
	for _, r := range runs {
		if k := len(merged) - 1; k >= 0 && merged[k].f.copy == r.f.copy && r.off <= merged[k].off+int64(merged[k].n) {
			merged[k].n = int(max(merged[k].off+int64(merged[k].n), r.off+int64(r.n)) - merged[k].off)
			continue
		}
		merged = append(merged, r)
	}
	j.recopy.round++
	buf := make([]byte, recopyRun)
	for _, r := range merged {
		f, err := os.Open(r.scratch)
		if err != nil {
			return err
		}
		for done := 0; done < r.n; {
			k := min(r.n-done, len(buf))
			got, err := f.ReadAt(buf[:k], r.off+int64(done))
			if err != nil && !errors.Is(err, io.EOF) {
				f.Close()
				return fmt.Errorf("read the roll-forward's scratch copy: %w", err)
			}
			// An undo tablespace the redo truncated (TRIM_PAGES) ends early in the
			// scratch copy, at a page boundary: the pages past its new end are not
			// patched.
			if got > 0 {
				if err := j.patch(r.f.copy, r.off+int64(done), buf[:got]); err != nil {
					f.Close()
					return err
				}
			}
			if got < k {
				break
			}
			done += k
		}
		f.Close()
	}
	return nil
}
