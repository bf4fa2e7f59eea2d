package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
	"golang.org/x/sync/errgroup"
)

// Base is the backup an incremental applies on (docs/incremental.md).
type Base struct {
	ID   string // its ferry manifest id ("" for a mariadb-backup base or --incremental-lsn)
	Name string // where it is, for messages
	// ToLSN is its to_lsn: the incremental's from_lsn, as mariadb-backup checks it.
	ToLSN uint64
	// FromLSN: every page whose LSN is above it is copied. It is the base's start LSN
	// (where its redo begins), so that every page the base copied while it changed is
	// copied again and one recovery with the newest redo makes the chain consistent.
	FromLSN uint64
	UID     string // its server's @@server_uid ("" if unknown)
	// Spaces are the base's tablespaces by space id, as its manifest records them (nil
	// without a ferry manifest): a tablespace whose identity differs is copied whole.
	Spaces map[uint32]manifest.Space
	// Have, if set, holds the tablespace files (by path in the datadir) the base holds
	// whole, as it copied them; every other one, the system tablespace's included, is
	// copied whole, and so is a system tablespace file whose identity changed (the base
	// is an interrupted copy: a clone's recipient resuming it).
	Have map[string]manifest.Space
}

// BaseFromManifest is the base a ferry backup's manifest describes.
func BaseFromManifest(m *manifest.Manifest, name string) (*Base, error) {
	if m.Prepared != nil {
		return nil, fmt.Errorf("the base %s was prepared by ferry prepare, which rolled back its open transactions: an incremental applies only on an unprepared base; take a full backup, or use an unprepared copy", name)
	}
	return &Base{ID: m.ID, Name: name, ToLSN: m.ChainLSN(), FromLSN: min(m.StartLSN, m.EndLSN), UID: m.Server.UID, Spaces: baseSpaces(m)}, nil
}

// BaseFromDir reads the base in directory dir: a complete ferry backup, or one
// made by mariadb-backup (full or incremental, prepared or not).
func BaseFromDir(dir string) (*Base, error) {
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err == nil {
		return nil, setting.Errorf("%s %s is an incomplete backup (interrupted before its manifest): take a new full backup", setting.IncrementalBasedir, dir)
	}
	m, err := manifest.Read(dir)
	switch {
	case err == nil:
		return BaseFromManifest(m, dir)
	case !errors.Is(err, manifest.ErrNotFound):
		return nil, err
	}
	cp, err := xtrabackup.ReadCheckpoints(dir)
	if err != nil {
		return nil, setting.Errorf("%s %s is not a backup (no %s or %s): %w", setting.IncrementalBasedir, dir, manifest.FileName, xtrabackup.CheckpointsFile, err)
	}
	b := &Base{Name: dir, ToLSN: cp.ToLSN, FromLSN: cp.ToLSN}
	if cp.BackupType == xtrabackup.TypeLogApplied {
		return b, nil // recovered up to its end: exact for every page it holds
	}
	// Not prepared: its pages are exact only below the checkpoint its redo starts from.
	c, err := redo.NewestCheckpoint(filepath.Join(dir, "ib_logfile0"))
	if err != nil {
		return nil, setting.Errorf("%s %s: read the checkpoint of its redo log: %w", setting.IncrementalBasedir, dir, err)
	}
	b.FromLSN = min(c.LSN, cp.ToLSN)
	return b, nil
}

// BaseFromLSN is the base of --incremental-lsn: pages above lsn are copied.
func BaseFromLSN(lsn uint64) *Base {
	return &Base{Name: fmt.Sprintf("LSN %d", lsn), ToLSN: lsn, FromLSN: lsn}
}

// checkBase refuses a base that is not of this server: another server_uid, or an end
// past the server's current LSN.
func (m *incrementalMode) checkBase(ctx context.Context, j *job) error {
	b := m.base
	if b.UID != "" && j.info.Vars["server_uid"] != "" && b.UID != j.info.Vars["server_uid"] {
		return fmt.Errorf("the base %s was taken on another server (server_uid %s, this one is %s): an incremental applies only on a backup of the same server; take a full backup", b.Name, b.UID, j.info.Vars["server_uid"])
	}
	_, cur, err := j.srv.LSNs(ctx)
	if err != nil {
		return err
	}
	if b.ToLSN > cur {
		return fmt.Errorf("the base %s ends at LSN %d, past this server's current LSN %d: it is a backup of another server (or of this one before it was restored from an older backup); take a full backup", b.Name, b.ToLSN, cur)
	}
	return nil
}

// selection says which pages an incremental copies.
type selection struct {
	from  uint64
	upto  uint64              // the redo copy's start: pages changed later are in its redo
	pages map[uint32][]uint32 // by space, from the redo since from; nil: read every page
	// fileOps are the spaces the redo since from deletes or creates a file of (set
	// with pages)
	fileOps map[uint32]bool
	why     string
}

// method names the selection for logs and the manifest.
func (s *selection) method() string {
	if s.pages != nil {
		return "redo"
	}
	return "scan"
}

// selectPages learns the pages changed since the base from the server's redo log if
// it still holds everything since the base's from LSN, up to where this backup's own
// redo copy starts; otherwise every page is read and those above from are kept.
func (m *incrementalMode) selectPages(ctx context.Context, j *job) *selection {
	s := &selection{from: m.base.FromLSN, upto: j.tail.t.Start().LSN}
	switch {
	case s.from == 0:
		s.why = "the base records no LSN: every page is read"
	case !j.redoLog().Parsed():
		s.why = fmt.Sprintf("the server's redo log is copied, not parsed: every page is read, and those changed past LSN %d kept", s.from)
	}
	if s.why != "" {
		j.log.Info("incremental: changed pages by scan", "why", s.why)
		return s
	}
	pages, ops, why := j.redoPagesSince(ctx, s.from, s.upto)
	if why != "" {
		s.why = why + ": every page is read"
	} else {
		s.pages, s.fileOps = pages, ops
		s.why = fmt.Sprintf("the server's redo log still holds everything since the base (LSN %d to %d): only the pages it names are read", s.from, s.upto)
	}
	j.log.Info("incremental: changed pages by "+s.method(), "why", s.why, "from_lsn", s.from, "pages_from_redo", pagesIn(pages))
	return s
}

// redoPagesSince reads the server's redo log from LSN from up to upto and returns the
// pages it changes (by space, sorted) and the spaces whose file it creates or deletes;
// or, if the log does not hold all of it (written over, resized) or cannot say, why
// not.
func (j *job) redoPagesSince(ctx context.Context, from, upto uint64) (map[uint32][]uint32, map[uint32]bool, string) {
	set, ops := redo.NewPageSet(0), map[uint32]bool{}
	onOp := func(op redo.FileOp) {
		if op.Kind == redo.FileDelete || op.Kind == redo.FileCreate {
			ops[op.SpaceID] = true
		}
	}
	t, err := j.openRedo(redo.Config{Path: j.redoPath(), Out: io.Discard, Server: j.srv, OnFileOp: onOp,
		Pages: set, Keys: j.logKeys, Algorithm: j.info.Vars["file_key_management_encryption_algorithm"], From: from})
	if err == nil {
		t.StopAt(upto)
		err = t.Run(ctx)
	}
	pages, ok := set.Take()
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, nil, "interrupted"
	case errors.Is(err, redo.ErrLogOverwritten):
		return nil, nil, fmt.Sprintf("the server's redo log no longer holds LSN %d (written over since, or the log was resized)", from)
	case err != nil:
		return nil, nil, fmt.Sprintf("reading the redo since LSN %d failed (%v)", from, err)
	case !ok:
		return nil, nil, fmt.Sprintf("more pages changed since LSN %d than the changed-page map holds", from)
	}
	return pages, ops, ""
}

// deltaCopy is one tablespace file being copied into <file>.delta.
type deltaCopy struct {
	ij  *innoJob
	in  *directio.File
	w   *delta.Writer
	out sink.File
	sum *crcAppender
	// whole: every page is kept (the file is not the base's: identity.go)
	whole bool
	// every: every page is kept of a system tablespace file the base lacks (an
	// interrupted copy's, Base.Have): applied onto nothing, the delta makes the file
	// (a system tablespace is never marked whole)
	every bool
	// imports: pages at LSN 0 that are not all zeros are kept too (imported since a
	// base without tablespace identities, identity.go)
	imports bool
	// next: the pages below it were considered already (a scan's next pass starts
	// back at an aligned offset)
	next uint32
	// from: pages whose LSN is above it are kept (the selection's)
	from uint64
}

// copyDeltas writes a .delta and .meta for each tablespace file, in parallel.
func (m *incrementalMode) copyDeltas(ctx context.Context, j *job, files []srcFile) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(j.cfg.Parallel)
	for _, f := range files {
		g.Go(func() error { return m.copyDelta(gctx, j, f) })
	}
	return g.Wait()
}

// copyDelta copies the changed pages of one file. A file whose page 0 is not written
// yet, or that vanished, was created or dropped during the copy: the reconciliation
// under BLOCK_DDL handles it.
func (m *incrementalMode) copyDelta(ctx context.Context, j *job, f srcFile) error {
	in, err := directio.Open(f.Abs)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", f.Abs, err)
	}
	defer in.Close()
	ij := &innoJob{src: f, page: j.info.PageSize}
	if err := j.readHeader(in, ij); err != nil || ij.checker == nil {
		return err
	}
	dc := &deltaCopy{ij: ij, in: in, from: m.sel.from}
	if why := m.replacedSince(ij); why != "" {
		if err := dc.replaced(j, m.base, why); err != nil {
			return err
		}
	}
	out, err := j.create(f.Rel+deltaExt, sink.FileOptions{})
	if err != nil {
		return err
	}
	dc.out, dc.sum = out, &crcAppender{f: out}
	dc.w = delta.NewWriter(dc.sum, ij.page)
	dc.imports = m.base.Spaces == nil && !ij.src.System
	if list, scan := m.sel.pagesOf(ij); scan || dc.whole || dc.every {
		err = j.deltaScan(ctx, dc)
	} else {
		j.prog.AddTotal(int64(len(list))*int64(ij.page) - f.Size)
		err = j.readRuns(ctx, dc, planRuns(list, int64(ij.page)))
	}
	if err == nil {
		err = dc.w.Close()
	}
	if cerr := out.Close(dc.sum.n); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.Rel, err)
	}
	sp := ij.space()
	sp.Whole = dc.whole
	j.record(copiedFile{Rel: f.Rel + deltaExt, Size: dc.sum.n, CRC: dc.sum.crc, SpaceID: ij.header.SpaceID, Known: true,
		Kind: manifest.KindDelta, Space: sp, Remote: ij.remote()})
	return j.writeMeta(f.Rel, ij, dc.whole)
}

// replaced makes the delta hold every page of a file that is not the base's (b, why):
// marked whole, or, for a system tablespace file an interrupted copy lacks, unmarked
// (it is never replaced, and is made from nothing). A system tablespace file the base
// holds that is another file cannot be brought up to date by a delta: an error.
func (dc *deltaCopy) replaced(j *job, b *Base, why string) error {
	f := dc.ij.src
	switch {
	case !f.System:
		dc.whole = true
		j.log.Info("incremental: tablespace copied whole", "file", f.Rel, "space_id", dc.ij.header.SpaceID, "why", why)
		return nil
	case b.Have != nil:
		if _, held := b.Have[f.Rel]; !held {
			dc.every = true
			j.log.Info("incremental: system tablespace file copied in full", "file", f.Rel, "why", why)
			return nil
		}
	}
	return fmt.Errorf("%s: %s: the system tablespace is not the base's, and an incremental cannot bring it up to date; take a full copy", f.Rel, why)
}

// replacedSince says why the tablespace ij is not the file the base holds ("" when
// it is): the incremental then copies it whole (identity.go).
func (m *incrementalMode) replacedSince(ij *innoJob) string {
	return m.base.replacedIn(ij.src.Rel, *ij.space(), m.sel.fileOps[ij.header.SpaceID])
}

// replacedIn says why the tablespace file rel (now, as read) is not the one the base
// holds, so that it is copied whole ("" when it is the base's file): an interrupted
// copy (Have) holds only the files it lists; the system tablespace is otherwise never
// replaced.
func (b *Base) replacedIn(rel string, now manifest.Space, fileOps bool) string {
	if b.Have != nil {
		had, ok := b.Have[rel]
		switch {
		case !ok:
			return "the base does not hold this file whole"
		case now.System && had.Identity != nil:
			return replaced(map[uint32]manifest.Space{had.ID: had}, now, false)
		}
	}
	if now.System {
		return ""
	}
	return replaced(b.Spaces, now, fileOps)
}

// deltaExt and metaExt name an incremental's files of a tablespace.
const (
	deltaExt = ".delta"
	metaExt  = ".meta"
)

// writeMeta stores <file>.meta; whole marks a delta holding every page of a file
// that replaces the base's.
func (j *job) writeMeta(rel string, ij *innoJob, whole bool) error {
	m := delta.Meta{PageSize: j.info.PageSize, ZipSize: ij.header.Flags.ZipSize(), SpaceID: ij.header.SpaceID, Whole: whole}
	mf, err := j.writeWhole(rel+metaExt, m.Bytes(), manifest.KindMeta)
	if err != nil {
		return err
	}
	j.record(copiedFile{Rel: mf.Path, Size: mf.Size, CRC: checksum.Sum(m.Bytes()), Kind: manifest.KindMeta})
	return nil
}

// pagesOf returns the pages of the file to copy (file-relative, sorted), or scan=true
// to read every page and keep those above from. A tablespace whose page 0 carries an
// LSN above from that the redo does not name was written without redo: it is scanned.
// (An imported tablespace is not found this way: IMPORT TABLESPACE leaves its pages at
// LSN 0. It is copied whole by its identity, identity.go.)
func (s *selection) pagesOf(ij *innoJob) (list []uint32, scan bool) {
	if s.pages == nil {
		return nil, true
	}
	all := s.pages[ij.header.SpaceID]
	lo := sort.Search(len(all), func(k int) bool { return all[k] >= ij.src.Base })
	named0 := lo < len(all) && all[lo] == ij.src.Base
	if lsn := ij.lsn0; lsn > s.from && lsn <= s.upto && !named0 && !ij.src.System {
		return nil, true
	}
	for _, p := range all[lo:] {
		list = append(list, p-ij.src.Base)
	}
	return list, false
}

// deltaScan reads the whole file, recopyRun bytes at a time, and keeps the pages
// above from; it reads on as long as the file grew meanwhile.
func (j *job) deltaScan(ctx context.Context, dc *deltaCopy) error {
	var done int64 // bytes of the file scanned
	for {
		size, err := dc.in.Size()
		if err != nil || size <= done {
			return err
		}
		var runs []pageRun
		for off := done &^ (directio.Align - 1); off < size; off += recopyRun {
			runs = append(runs, pageRun{first: off, length: recopyRun, bytes: true})
		}
		if err := j.readRuns(ctx, dc, runs); err != nil {
			return err
		}
		done = size
	}
}

// deltaGap: listed pages at most this many pages apart are read in one run, with
// the pages between them.
const deltaGap = 8

// deltaReaders is how many runs of one file's listed pages are read at once: they are
// scattered, and a disk serves several small reads at once far faster than one by one.
const deltaReaders = 8

// pageRun is one read: length bytes from page first (from byte first if bytes is
// set), keeping the listed pages (every page if listed is nil).
type pageRun struct {
	first  int64
	length int64
	bytes  bool
	listed map[uint32]bool
}

// offset is where the run starts in the file.
func (r pageRun) offset(ps int64) int64 {
	if r.bytes {
		return r.first
	}
	return r.first * ps
}

// planRuns groups sorted pages into aligned reads of near neighbours.
func planRuns(pages []uint32, ps int64) []pageRun {
	unit := max(ps, directio.Align) / ps
	maxPages := int64(recopyRun) / ps
	var runs []pageRun
	for len(pages) > 0 {
		first := int64(pages[0]) / unit * unit
		k := 1
		for k < len(pages) && int64(pages[k]) < first+maxPages && pages[k]-pages[k-1] <= deltaGap {
			k++
		}
		last := int64(pages[k-1])
		r := pageRun{first: first, length: min((last/unit+1)*unit-first, maxPages) * ps, listed: map[uint32]bool{}}
		for _, p := range pages[:k] {
			r.listed[p] = true
		}
		runs = append(runs, r)
		pages = pages[k:]
	}
	return runs
}

// runRead is a run read, or being read.
type runRead struct {
	run  pageRun
	buf  []byte
	got  int
	err  error
	done chan struct{}
}

// readRuns reads the runs, deltaReaders at a time, and keeps, in page order, the
// pages they list (all of a scan's) whose LSN is above from: a page the redo names
// whose LSN is not above from was freed since (InnoDB does not write freed pages
// back), and its content does not matter. Pages past the file's end are skipped.
func (j *job) readRuns(ctx context.Context, dc *deltaCopy, runs []pageRun) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ps := int64(dc.ij.page)
	bufs := make(chan []byte, deltaReaders+1)
	for range deltaReaders + 1 {
		bufs <- directio.AlignedBuffer(recopyRun)
	}
	reads := make(chan *runRead, deltaReaders-1)
	go func() {
		defer close(reads)
		for _, r := range runs {
			rr := &runRead{run: r, done: make(chan struct{})}
			select {
			case rr.buf = <-bufs:
			case <-ctx.Done():
				return
			}
			go func() {
				defer close(rr.done)
				rr.got, rr.err = j.readRaw(ctx, dc.in, dc.ij, rr.buf[:r.length], r.offset(ps))
			}()
			reads <- rr
		}
	}()
	var err error
	for rr := range reads {
		<-rr.done
		if err == nil {
			err = rr.err
		}
		if err == nil {
			j.prog.Add(int64(rr.got))
			err = j.keepNewer(ctx, dc, rr.buf[:rr.got], rr.run.offset(ps), rr.run.listed)
		}
		if err != nil {
			cancel() // the reads left end; they are waited for
		}
		bufs <- rr.buf
	}
	return err
}

// keepNewer adds to the delta the pages of b (read at off) whose LSN is above from
// (and, if listed is set, that it lists), each validated first (a torn page read
// again); the pages left out are not validated: they are not stored, and a torn read
// of one showing an LSN not above from is of a page unchanged before the redo copy's
// start, whose changes since are in the incremental's redo.
func (j *job) keepNewer(ctx context.Context, dc *deltaCopy, b []byte, off int64, listed map[uint32]bool) error {
	ps := dc.ij.page
	for i := 0; i+ps <= len(b); i += ps {
		no := uint32((off + int64(i)) / int64(ps))
		page := b[i : i+ps]
		if no < dc.next {
			continue
		}
		dc.next = no + 1
		if !dc.whole && !dc.every && (listed != nil && !listed[no] || !changedSince(page, dc.from, dc.imports)) {
			continue
		}
		if err := j.validate(ctx, dc.in, dc.ij, page, off+int64(i)); err != nil {
			return err
		}
		if err := dc.w.Add(no, page); err != nil {
			return err
		}
	}
	return nil
}

// changedSince says whether a page read by an incremental belongs in it: its LSN is
// above from, or, if imports is set, it is an imported page (LSN 0 on a written page:
// IMPORT TABLESPACE writes its pages without redo and with LSN 0, and a page InnoDB
// never wrote is all zeros).
func changedSince(page []byte, from uint64, imports bool) bool {
	lsn := innodb.PageLSN(page)
	return lsn > from || imports && lsn == 0 && !innodb.IsZero(page)
}

// crcAppender writes a sink.File sequentially, counting and checksumming.
type crcAppender struct {
	f   sink.File
	n   int64
	crc uint32
}

func (a *crcAppender) Write(p []byte) (int, error) {
	if err := a.f.WriteAt(p, a.n); err != nil {
		return 0, err
	}
	a.n += int64(len(p))
	a.crc = checksum.Update(a.crc, p)
	return len(p), nil
}

// deltaDDL is reconcileDDL for an incremental: a delta that is no longer of the
// tablespace at its path (dropped, renamed, re-created during the copy) is removed, or
// in an end that cannot take back what it was sent, cancelled by a .del marker applied
// after the deltas; each tablespace without a valid delta (created or renamed during
// the copy) is copied whole as <base>.new.
type deltaDDL struct{}

func (deltaDDL) reconcile(ctx context.Context, j *job, current []srcFile, e ddlEffects) error {
	keep, recopy, err := j.keptCopies(current, e, func(rel string) string { return rel + deltaExt })
	if err != nil {
		return err
	}
	if err := j.dropStaleDeltas(keep); err != nil {
		return err
	}
	return j.copyChangedByDDL(ctx, recopy, j.copyInnoDBFiles, true)
}

// storedName: a whole tablespace beside the deltas is <base>.new.
func (deltaDDL) storedName(_ *job, rel string) string {
	return strings.TrimSuffix(rel, innodbExt) + newCopy
}

// dropStaleDeltas removes (or cancels with a .del marker) the deltas not kept.
func (j *job) dropStaleDeltas(keep map[string]bool) error {
	var stale []string
	for name, f := range j.files {
		if rel, ok := strings.CutSuffix(name, deltaExt); ok && f.Kind == manifest.KindDelta && !keep[rel] {
			stale = append(stale, rel)
		}
	}
	sort.Strings(stale)
	for _, rel := range stale {
		if j.sink.Caps().Rewrite {
			for _, name := range []string{rel + deltaExt, rel + metaExt} {
				if err := j.removeCopy(name); err != nil {
					return err
				}
			}
			continue
		}
		base, ok := strings.CutSuffix(rel, innodbExt)
		if !ok {
			continue
		}
		f, err := j.writeWhole(base+delMarker, nil, manifest.KindDDL)
		if err != nil {
			return err
		}
		j.record(copiedFile{Rel: f.Path, Kind: f.Kind})
	}
	return nil
}

// FileIdentity returns the inode and birth time (Unix nanoseconds, 0 where none is
// kept) of the file at path, as a tablespace's manifest.Identity records them: a
// clone's donor tells them for its system tablespace, so that a recipient does not
// resume an interrupted clone of files replaced since.
func FileIdentity(path string) (inode uint64, birthNS int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return fileIdentity(int(f.Fd()))
}
