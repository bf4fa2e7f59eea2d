package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/innodb"
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
	Size    int64
	CRC     uint32
	Sparse  bool
	SpaceID uint32 // from page 0; 0 when page 0 was not yet written (deferred creation)
	Known   bool   // SpaceID was read from a valid page 0
	Kind    string
}

// innoJob is an InnoDB file prepared for a segmented copy.
type innoJob struct {
	src     srcFile
	dst     string
	sparse  bool
	checker *innodb.Checker // nil when page 0 is not yet written
	page    int             // physical page size
	header  innodb.SpaceHeader
	segs    []segment
}

type segment struct {
	off, len int64 // len < 0: read to end of file
	size     int64 // bytes copied
	crc      uint32
	vanished bool // the file was gone when the segment was opened
}

// copyInnoDBFiles copies files with cfg.Parallel workers, splitting large files into
// segments, and returns what was stored. Files that vanish (dropped or renamed by DDL
// while the backup runs) are skipped: the DDL reconciliation under BLOCK_DDL handles them.
func (j *job) copyInnoDBFiles(ctx context.Context, files []srcFile) ([]copiedFile, error) {
	var jobs []*innoJob
	for _, f := range files {
		ij, err := j.prepareInnoJob(f)
		if errors.Is(err, os.ErrNotExist) {
			j.log.Debug("file vanished before copy", "file", f.Rel)
			continue
		}
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, ij)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(j.cfg.Parallel)
	for _, ij := range jobs {
		for i := range ij.segs {
			g.Go(func() error { return j.copySegment(gctx, ij, &ij.segs[i]) })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]copiedFile, 0, len(jobs))
	for _, ij := range jobs {
		if ij.vanished() {
			os.Remove(ij.dst)
			continue
		}
		cf, err := finishInnoJob(ij)
		if err != nil {
			return nil, err
		}
		out = append(out, cf)
	}
	return out, nil
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
	ij := &innoJob{src: f, dst: filepath.Join(j.cfg.TargetDir, f.Rel), sparse: filecopy.IsSparse(fi), page: j.info.PageSize}
	if err := j.readHeader(in, ij); err != nil {
		return nil, err
	}
	t, err := filecopy.Create(ij.dst, ij.sparse)
	if err != nil {
		return nil, err
	}
	t.Close()
	ij.segs = planSegments(size, j.cfg.Segment, int64(ij.page))
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
	buf := directio.AlignedBuffer(64 << 10)
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
	ij.header, ij.page = h, h.Flags.PhysicalSize()
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

func finishInnoJob(ij *innoJob) (copiedFile, error) {
	var size int64
	var crc uint32
	for _, s := range ij.segs {
		crc = checksum.Combine(crc, s.crc, s.size)
		size += s.size
	}
	t, err := filecopy.Open(ij.dst, ij.sparse, false)
	if err != nil {
		return copiedFile{}, err
	}
	defer t.Close()
	if err := t.Truncate(size); err != nil {
		return copiedFile{}, err
	}
	return copiedFile{Rel: ij.src.Rel, Size: size, CRC: crc, Sparse: ij.sparse,
		SpaceID: ij.header.SpaceID, Known: ij.checker != nil, Kind: "innodb"}, nil
}

func (ij *innoJob) vanished() bool {
	for _, s := range ij.segs {
		if s.vanished {
			return true
		}
	}
	return false
}
