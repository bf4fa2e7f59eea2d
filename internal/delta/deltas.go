package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/safepath"
	"golang.org/x/sys/unix"
)

// Offsets in page 0 that applying a delta reads.
const (
	offSpaceID = 34      // FIL_PAGE_SPACE_ID
	offFSPSize = 38 + 8  // FSP_HEADER_OFFSET + FSP_SIZE
	headerRead = 1 << 10 // bytes of page 0 read to identify a target file
)

// job is one .delta to apply.
type job struct {
	rel   string // the target tablespace, relative to target
	delta string // the .delta, relative to inc
	meta  Meta
	src   string // the target file holding the space now; "" to create rel
	tmp   string // where src waits while files move (src != rel)
}

// spaceFile is what page 0 of a target tablespace file says.
type spaceFile struct {
	id       uint32
	physical int
}

// loadJobs reads every .meta and checks the structure of every .delta, before
// anything in target changes.
func (a *applier) loadJobs(f *incFiles) ([]*job, error) {
	var jobs []*job
	ids, rels := map[uint32]string{}, map[string]bool{}
	for _, x := range f.deltas {
		j, err := a.newJob(x, f)
		if err != nil {
			return nil, err
		}
		if other, dup := ids[j.meta.SpaceID]; dup {
			return nil, fmt.Errorf("apply incremental: %s and %s are both for space id %d", other, j.delta, j.meta.SpaceID)
		}
		if rels[j.rel] {
			return nil, fmt.Errorf("apply incremental: two deltas for %s", j.rel)
		}
		if err := a.checkDelta(j); err != nil {
			return nil, fmt.Errorf("apply incremental: %s: %w", j.delta, err)
		}
		ids[j.meta.SpaceID], rels[j.rel] = j.delta, true
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// checkDelta reads the cluster headers of j's delta.
func (a *applier) checkDelta(j *job) error {
	r, in, err := a.openDelta(j)
	if err != nil {
		return err
	}
	defer in.Close()
	return r.check()
}

// openDelta opens j's delta for reading; the caller closes the file.
func (a *applier) openDelta(j *job) (*Reader, *os.File, error) {
	in, err := openIn(a.inc, j.delta)
	if err != nil {
		return nil, nil, err
	}
	fi, err := in.Stat()
	if err != nil {
		in.Close()
		return nil, nil, err
	}
	return NewReader(in, fi.Size(), j.meta.Physical()), in, nil
}

// resolve finds the target file each job applies to.
func (a *applier) resolve(jobs []*job) error {
	idx, err := a.indexSpaces()
	if err != nil {
		return err
	}
	byID := map[uint32][]string{}
	for rel, s := range idx {
		byID[s.id] = append(byID[s.id], rel)
	}
	for _, rels := range byID {
		slices.Sort(rels)
	}
	srcs := map[string]string{}
	for _, j := range jobs {
		if err := a.findSource(j, idx, byID); err != nil {
			return fmt.Errorf("apply incremental: %s: %w", j.delta, err)
		}
		if other, dup := srcs[j.src]; dup && j.src != "" {
			return fmt.Errorf("apply incremental: %s and %s both claim %s", other, j.delta, j.src)
		}
		srcs[j.src] = j.delta
	}
	return nil
}

// newJob reads the .meta of delta x ("db/t.ibd" for db/t.ibd.delta). A delta of a table
// created during the backup, "db/t.new.delta", applies to db/t.ibd.
func (a *applier) newJob(x string, f *incFiles) (*job, error) {
	j := &job{rel: x, delta: x + ".delta"}
	if t, ok := strings.CutSuffix(x, ".new"); ok {
		j.rel = t + ".ibd"
	}
	if !f.metas[x] {
		return nil, fmt.Errorf("apply incremental: %s has no %s.meta beside it", j.delta, x)
	}
	b, err := readSmall(a.inc, x+".meta", MaxMetaSize)
	if err != nil {
		return nil, fmt.Errorf("apply incremental: %w", err)
	}
	if j.meta, err = ParseMeta(b); err != nil {
		return nil, fmt.Errorf("apply incremental: %s.meta: %w", x, err)
	}
	if !isTablespace(j.rel) {
		return nil, fmt.Errorf("apply incremental: %s is not for a tablespace (*.ibd, *.ibu, ibdata*, undo*)", j.delta)
	}
	return j, nil
}

// findSource sets j.src: j.rel if it holds the space (or cannot be identified and
// no other file holds the space), another .ibd file that holds it, or "" (create).
func (a *applier) findSource(j *job, idx map[string]spaceFile, byID map[uint32][]string) error {
	id := j.meta.SpaceID
	s, known, exists, err := a.identify(j.rel, idx)
	if err != nil {
		return err
	}
	if known && s.id == id {
		j.src = j.rel
		return checkPhysical(j, s)
	}
	if isSystem(j.rel) {
		if known {
			return fmt.Errorf("target %s holds space id %d, the delta is for space id %d", j.rel, s.id, id)
		}
		if exists {
			j.src = j.rel
		}
		return nil
	}
	others := slices.DeleteFunc(slices.Clone(byID[id]), func(r string) bool { return r == j.rel })
	switch {
	case len(others) > 1:
		return fmt.Errorf("space id %d is held by several target files: %s", id, strings.Join(others, ", "))
	case len(others) == 1:
		j.src = others[0]
		return checkPhysical(j, idx[j.src])
	case exists && !known:
		j.src = j.rel // page 0 unreadable: applied in place, not thrown away
		a.log.Debug("target page 0 unreadable: delta applied in place", "file", j.rel)
	}
	return nil
}

// identify reads page 0 of target/rel (from idx for .ibd files).
func (a *applier) identify(rel string, idx map[string]spaceFile) (s spaceFile, known, exists bool, err error) {
	p, err := safepath.Join(a.target, rel)
	if err != nil {
		return s, false, false, err
	}
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return s, false, false, nil
	} else if err != nil {
		return s, false, false, err
	}
	if !isSystem(rel) {
		s, known = idx[rel]
		return s, known, true, nil
	}
	s, known, err = readSpace(p)
	return s, known, true, err
}

func checkPhysical(j *job, s spaceFile) error {
	if s.physical != j.meta.Physical() {
		return fmt.Errorf("target %s has %d-byte pages, the delta %d-byte pages", j.src, s.physical, j.meta.Physical())
	}
	return nil
}

// indexSpaces reads page 0 of every .ibd file of target; files whose page 0 is not a
// valid tablespace header are left out.
func (a *applier) indexSpaces() (map[string]spaceFile, error) {
	idx := map[string]spaceFile{}
	err := walk(a.target, func(rel string, d fs.DirEntry) error {
		if d.IsDir() || !strings.HasSuffix(rel, ".ibd") {
			return nil
		}
		s, ok, err := readSpace(a.target + "/" + rel)
		if ok {
			idx[rel] = s
		}
		return err
	})
	return idx, err
}

// readSpace reads the tablespace header of page 0 of p; ok is false if there is none.
func readSpace(p string) (s spaceFile, ok bool, err error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return s, false, fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	b := make([]byte, headerRead)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return s, false, fmt.Errorf("read %s: %w", p, err)
	}
	h, err := innodb.ParseSpaceHeader(b[:n])
	if err != nil {
		return s, false, nil
	}
	return spaceFile{id: h.SpaceID, physical: h.Flags.PhysicalSize()}, true, nil
}

// applyDeltas moves every file found under another name out of the way, then puts
// each in place (or creates it) and applies its delta.
func (a *applier) applyDeltas(jobs []*job) error {
	for _, j := range jobs {
		if j.src == "" || j.src == j.rel {
			continue
		}
		p, err := safepath.Join(a.target, j.src)
		if err != nil {
			return fmt.Errorf("apply incremental: %s: %w", j.delta, err)
		}
		j.tmp = p + ".ferry-mv"
		if err := os.Rename(p, j.tmp); err != nil {
			return fmt.Errorf("apply incremental: %s: move %s aside: %w", j.delta, j.src, err)
		}
	}
	for _, j := range jobs {
		if err := a.applyJob(j); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applyJob(j *job) error {
	create := j.src == ""
	if j.src != j.rel {
		why := fmt.Sprintf("stale: %s is for space id %d", j.delta, j.meta.SpaceID)
		if err := a.removeTablespace(j.rel, why); err != nil {
			return err
		}
	}
	if j.tmp != "" {
		if err := a.finishRename(j.tmp, j.rel); err != nil {
			return err
		}
		a.log.Debug("tablespace renamed", "from", j.src, "to", j.rel, "reason", fmt.Sprintf("holds space id %d", j.meta.SpaceID))
	}
	n, err := a.writeDelta(j, create)
	a.stats.Pages += n
	if err != nil {
		return fmt.Errorf("apply incremental: %s to %s: %w", j.delta, j.rel, err)
	}
	a.stats.Deltas++
	return nil
}

// writeDelta writes the pages of j's delta into target/j.rel and syncs it (unless
// Options.NoSync).
func (a *applier) writeDelta(j *job, create bool) (int, error) {
	in, err := openIn(a.inc, j.delta)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	p, err := safepath.MkdirParents(a.target, j.rel, 0o750)
	if err != nil {
		return 0, err
	}
	flags := os.O_RDWR | syscall.O_NOFOLLOW
	if create {
		flags |= os.O_CREATE | os.O_EXCL
		a.stats.Created++
		a.touched(p)
		a.log.Debug("tablespace created", "file", j.rel, "space_id", j.meta.SpaceID)
	}
	if j.meta.Whole {
		if err := checkWhole(j, in, fi.Size()); err != nil {
			return 0, err
		}
	}
	out, err := os.OpenFile(p, flags, 0o640)
	if err != nil {
		return 0, err
	}
	if j.meta.Whole && !create {
		// The file replaced the base's since (imported, re-created under its space
		// id): none of the base's pages stay, and it is no longer than the delta says.
		a.log.Debug("tablespace replaced whole", "file", j.rel, "space_id", j.meta.SpaceID)
		if err := out.Truncate(0); err != nil {
			return 0, errors.Join(err, out.Close())
		}
	}
	skip := func(no uint32) bool { return a.skip != nil && a.skip(keyOf(j.meta, j.rel, no)) }
	n, skipped, err := writePages(NewReader(in, fi.Size(), j.meta.Physical()), out, j.meta, skip)
	a.stats.Skipped += skipped
	switch {
	case err != nil:
	case a.noSync: // start writing the pages back now: the caller's sync then waits less
		_ = unix.SyncFileRange(int(out.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	default:
		err = out.Sync()
	}
	return n, errors.Join(err, out.Close())
}

// writePages writes every page of rd that skip does not name at its offset in out,
// neighbours in one write, extending out to the FSP_SIZE of a page 0.
func writePages(rd *Reader, out *os.File, m Meta, skip func(uint32) bool) (n, skipped int, err error) {
	w := runWriter{out: out, ps: int64(m.Physical())}
	for {
		no, page, err := rd.Next()
		if err == io.EOF {
			return n, skipped, w.flush()
		}
		if err != nil {
			return n, skipped, err
		}
		if skip(no) {
			skipped++
			continue
		}
		n++
		if no == 0 {
			if err := extend(out, page, m); err != nil {
				return n, skipped, err
			}
		}
		if err := w.add(no, page); err != nil {
			return n, skipped, err
		}
	}
}

// runMax bounds the bytes of neighbouring pages written at once.
const runMax = 1 << 20

// runWriter gathers pages with consecutive numbers into one write.
type runWriter struct {
	out   *os.File
	ps    int64
	first uint32 // page number of buf's first page
	buf   []byte
}

func (w *runWriter) add(no uint32, page []byte) error {
	if len(w.buf) > 0 && (int64(no) != int64(w.first)+int64(len(w.buf))/w.ps || len(w.buf)+len(page) > runMax) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(w.buf) == 0 {
		w.first = no
	}
	w.buf = append(w.buf, page...)
	return nil
}

func (w *runWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.out.WriteAt(w.buf, int64(w.first)*w.ps)
	w.buf = w.buf[:0]
	return err
}

// extend grows out to the size page 0 records (FSP_SIZE pages); it never shrinks.
func extend(out *os.File, page0 []byte, m Meta) error {
	if id := binary.BigEndian.Uint32(page0[offSpaceID:]); id != m.SpaceID {
		return fmt.Errorf("%w: page 0 is of space id %d, the .meta says %d", ErrCorrupt, id, m.SpaceID)
	}
	want := int64(binary.BigEndian.Uint32(page0[offFSPSize:])) * int64(m.Physical())
	fi, err := out.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < want {
		return out.Truncate(want)
	}
	return nil
}

// checkWhole refuses a delta marked whole that could not replace a file: one of the
// system tablespace (never replaced), or one that does not start with page 0 (it would
// empty the file and leave it without its header).
func checkWhole(j *job, in io.ReaderAt, size int64) error {
	if j.meta.SpaceID == 0 {
		return fmt.Errorf("%s: %w: a delta of the system tablespace marked whole", j.delta, ErrCorrupt)
	}
	no, _, err := NewReader(in, size, j.meta.Physical()).Next()
	if err != nil || no != 0 {
		return fmt.Errorf("%s: %w: a delta marked whole that does not start with page 0", j.delta, ErrCorrupt)
	}
	return nil
}
