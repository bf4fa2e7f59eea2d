package backup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/workers"
	"golang.org/x/sync/errgroup"
)

// pageRetries bounds re-reads of a page that fails validation (a torn read of a page
// the server was writing); a page still bad after them is corrupt.
const (
	pageRetries    = 10
	pageRetryPause = 100 * time.Millisecond
)

// copiedFile records one file stored in the backup.
type copiedFile struct {
	Rel     string
	Stored  string // name in the backup when not Rel (a stream's <name>.new re-copy)
	Size    int64
	CRC     uint32
	Sparse  bool
	SpaceID uint32 // from page 0; 0 when page 0 was not yet written (deferred creation)
	Known   bool   // SpaceID was read from a valid page 0
	Kind    string
	Space   *manifest.Space // what page validation needs, when page 0 was valid
	Remote  string          // a DATA DIRECTORY tablespace's path on the source
}

// innoJob is an InnoDB file prepared for a segmented copy.
type innoJob struct {
	src     srcFile
	out     sink.File
	stored  string // name in the backup when not src.Rel
	once    sync.Once
	outErr  error
	pending atomic.Int32 // segments not yet copied
	sparse  bool
	checker *innodb.Checker // nil when page 0 is not yet written
	page    int             // physical page size
	header  innodb.SpaceHeader
	lsn0    uint64 // FIL_PAGE_LSN of page 0 when it was read
	inode   uint64 // the file's inode and birth time (Unix ns, 0 if unknown) then
	birth   int64
	segs    []segment
	held    []sink.Held // ranges a resumed backup's end already stores (resume.go)
}

type segment struct {
	off, len int64 // len < 0: read to end of file
	size     int64 // bytes copied
	crc      uint32
	vanished bool // the file was gone when the segment was opened
	held     bool // stored by an interrupted attempt: not copied (resume.go)
}

// copyInnoDBFiles copies files, largest first, splitting large files into segments,
// and records what was stored: segments of large files with cfg.Parallel workers,
// whole small files with smallWorkers more at the same time (a small file's copy waits
// on opens and creates more than on its bytes). A file is created when its first
// segment starts and finished by its last one, so a stream holds only the files being
// copied. Files that vanish (dropped or renamed by DDL while the backup runs) are
// skipped: the DDL reconciliation under BLOCK_DDL handles them.
func (j *job) copyInnoDBFiles(ctx context.Context, files []srcFile) error {
	jobs, err := j.prepareInnoJobs(ctx, files)
	if err != nil {
		return err
	}
	var tasks []segTask
	for _, ij := range jobs {
		n := 0
		for i := range ij.segs {
			if !ij.segs[i].held {
				tasks = append(tasks, segTask{ij, i})
				n++
			}
		}
		ij.pending.Store(int32(n))
	}
	var done atomic.Int64
	plan := workers.Plan{Small: workers.SmallFile, Large: j.cfg.Parallel, SmallWorkers: j.smallWorkers()}
	return workers.BySize(ctx, tasks, segTask.size, plan, func(ctx context.Context, t segTask) error {
		ij := t.ij
		if err := j.copySegment(ctx, ij, &ij.segs[t.seg]); err != nil {
			return err
		}
		if ij.pending.Add(-1) > 0 {
			return nil
		}
		if err := j.finishInnoJob(ij); err != nil {
			return err
		}
		if err := j.patchHeld(ctx, ij); err != nil {
			return err
		}
		faultpoint.At(ctx, "backup-file", int(done.Add(1)))
		return nil
	})
}

// segTask is one segment of a file to copy.
type segTask struct {
	ij  *innoJob
	seg int
}

// size is the size of the task's file: a file's segments go together, largest first.
func (t segTask) size() int64 { return t.ij.src.Size }

// smallWorkers is how many small files are copied at once, beside cfg.Parallel workers
// of large ones.
func (j *job) smallWorkers() int { return max(workers.SmallFileWorkers, j.cfg.Parallel) }

// headerReaders is how many files' page 0 prepareInnoJobs reads at once.
const headerReaders = 16

// prepareInnoJobs prepares a job per file (prepareInnoJob), headerReaders at a time
// once the system tablespace's files are done in order (ibdata2 and later take
// ibdata1's checker). Files gone meanwhile are left out.
func (j *job) prepareInnoJobs(ctx context.Context, files []srcFile) ([]*innoJob, error) {
	jobs := make([]*innoJob, len(files))
	prepare := func(i int) error {
		ij, err := j.prepareInnoJob(files[i])
		if errors.Is(err, os.ErrNotExist) {
			j.log.Debug("file vanished before copy", "file", files[i].Rel)
			return nil
		}
		jobs[i] = ij
		return err
	}
	for i, f := range files {
		if f.System {
			if err := prepare(i); err != nil {
				return nil, err
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(headerReaders)
	for i, f := range files {
		if f.System {
			continue
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return prepare(i)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(jobs, func(ij *innoJob) bool { return ij == nil }), nil
}

// openOut creates the file's copy once, for whichever segment starts first.
func (j *job) openOut(ij *innoJob) error {
	ij.once.Do(func() {
		if ij.stored = j.ddl.storedName(j, ij.src.Rel); ij.stored == ij.src.Rel {
			ij.stored = ""
		}
		if len(ij.held) > 0 && ij.stored != "" {
			ij.outErr = fmt.Errorf("%s: kept from an interrupted backup but stored as %s (internal error)", ij.src.Rel, ij.stored)
			return
		}
		ij.out, ij.outErr = j.create(cmp.Or(ij.stored, ij.src.Rel), sink.FileOptions{Sparse: ij.sparse || j.holes(ij), Size: ij.src.Size, Space: ij.space(), Keep: len(ij.held) > 0})
	})
	return ij.outErr
}

// prepareInnoJob reads page 0, creates the target and plans the segments.
func (j *job) prepareInnoJob(f srcFile) (*innoJob, error) {
	in, err := directio.Open(f.Abs)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	size, err := in.Size()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", f.Abs, err)
	}
	fi, err := os.Stat(f.Abs)
	if err != nil {
		return nil, err
	}
	ij := &innoJob{src: f, sparse: filecopy.IsSparse(fi), page: j.info.PageSize}
	if err := j.readHeader(in, ij); err != nil {
		return nil, err
	}
	ij.segs = planSegments(size, j.cfg.Segment, int64(ij.page))
	j.holdRanges(ij, size)
	j.prog.AddTotal(size - f.Size)
	return ij, nil
}

// readHeader reads page 0 of f (for ibdata2+ the checker comes from ibdata1).
func (j *job) readHeader(in *directio.File, ij *innoJob) error {
	if ij.src.System && ij.src.Base > 0 {
		ij.checker, ij.header = j.sysChecker, j.sysHeader
		ij.page = ij.header.Flags.PhysicalSize()
		return nil
	}
	buf := directio.AlignedBuffer(cmp.Or(j.info.PageSize, 64<<10)) // page 0 is never larger than a logical page
	n, err := in.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read page 0 of %s: %w", ij.src.Abs, err)
	}
	if n < 64 || innodb.IsZero(buf[:min(n, j.info.PageSize)]) {
		return nil // not yet written: copied raw, re-copied under BLOCK_DDL
	}
	h, err := innodb.ParseSpaceHeader(buf[:n])
	if err != nil {
		return fmt.Errorf("%s: %w", ij.src.Abs, err)
	}
	h.Flavor = j.layout().flavor()
	ij.header, ij.page, ij.lsn0 = h, h.Flags.PhysicalSize(), innodb.PageLSN(buf)
	if ij.inode, ij.birth, err = fileIdentity(int(in.Fd())); err != nil {
		return fmt.Errorf("%s: %w", ij.src.Abs, err)
	}
	ij.checker = innodb.NewChecker(h, ij.src.System)
	if ij.src.System && ij.src.Base == 0 {
		j.sysChecker, j.sysHeader = ij.checker, h
	}
	return nil
}

// planSegments splits size into segments of about seg bytes (multiples of page); the
// last one reads to the end of file, which may have grown.
func planSegments(size, seg, page int64) []segment {
	seg = max(seg/page*page, page)
	var out []segment
	for off := int64(0); off+seg < size; off += seg {
		out = append(out, segment{off: off, len: seg})
	}
	last := int64(0)
	if len(out) > 0 {
		last = out[len(out)-1].off + seg
	}
	return append(out, segment{off: last, len: -1})
}

// remote is the source path of a DATA DIRECTORY tablespace, "" for the others.
func (ij *innoJob) remote() string {
	if ij.src.Remote {
		return ij.src.Abs
	}
	return ""
}

// finishInnoJob ends the copy of a file after its last segment and records it.
func (j *job) finishInnoJob(ij *innoJob) error {
	if ij.vanished() {
		return j.dropVanished(ij)
	}
	var size int64
	var crc uint32
	for _, s := range ij.segs {
		crc = checksum.Combine(crc, s.crc, s.size)
		size += s.size
	}
	if err := ij.out.Close(size); err != nil {
		return fmt.Errorf("%s: %w", ij.src.Rel, err)
	}
	ij.out = nil // the job lives until the whole copy ends; what the end keeps per file need not
	j.record(copiedFile{Rel: ij.src.Rel, Stored: ij.stored, Size: size, CRC: crc, Sparse: ij.sparse,
		SpaceID: ij.header.SpaceID, Known: ij.checker != nil, Kind: manifest.KindInnoDB, Space: ij.space(), Remote: ij.remote()})
	return nil
}

// dropVanished ends the copy of a file that disappeared (dropped or renamed by DDL)
// and removes it where the backup allows; in a stream it stays and the DDL
// reconciliation sends a .del marker for it.
func (j *job) dropVanished(ij *innoJob) error {
	if ij.out == nil {
		return nil
	}
	if err := ij.out.Close(0); err != nil {
		return err
	}
	if !j.sink.Caps().Rewrite {
		j.record(copiedFile{Rel: ij.src.Rel, Stored: ij.stored, Kind: manifest.KindInnoDB})
		return nil
	}
	return j.sink.Remove(ij.src.Rel)
}

// space describes the tablespace for the manifest (nil when page 0 was not written).
func (ij *innoJob) space() *manifest.Space {
	if ij.checker == nil {
		return nil
	}
	h := ij.header
	s := &manifest.Space{ID: h.SpaceID, Flags: uint32(h.Flags), Crypt: h.CryptData, System: ij.src.System, FirstPage: ij.src.Base}
	if ij.inode != 0 {
		s.Identity = &manifest.Identity{Inode: ij.inode, BirthNS: ij.birth, Pages: h.SizePages, LSN: ij.lsn0}
	}
	return s
}

func (ij *innoJob) vanished() bool {
	for _, s := range ij.segs {
		if s.vanished {
			return true
		}
	}
	return false
}
