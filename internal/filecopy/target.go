// Package filecopy writes copied files: fresh targets that keep sparse files sparse,
// plain checksummed copies, and whole-filesystem sync before a manifest is written.
package filecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/directio"
	"golang.org/x/sys/unix"
)

// BlockSize is the granularity at which zero runs are left as holes.
const BlockSize = 4096

// ErrDiskFull is wrapped by write errors caused by a full filesystem.
var ErrDiskFull = errors.New("no space left on device")

// IsSparse reports whether the file occupies fewer blocks than its size.
func IsSparse(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Blocks*512 < fi.Size()
}

// Target is a new file being written at arbitrary offsets.
type Target struct {
	f      *os.File
	direct *os.File // O_DIRECT descriptor for aligned writes; nil if not wanted or unsupported
	sparse bool
	path   string
}

// Create makes a new file (parents included); it refuses to overwrite an existing file.
// With sparse set, all-zero 4 KiB blocks are skipped so they stay holes.
func Create(path string, sparse bool) (*Target, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, WrapWriteErr(err))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o640)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, WrapWriteErr(err))
	}
	return &Target{f: f, sparse: sparse, path: path}, nil
}

// Open opens an existing file for writing at offsets (used when several workers write
// segments of one file). With direct set, 4 KiB-aligned writes from aligned buffers go
// through O_DIRECT: no page-cache copy, and nothing left to flush at the end.
func Open(path string, sparse, direct bool) (*Target, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, noFollowErr(err))
	}
	t := &Target{f: f, sparse: sparse, path: path}
	if direct {
		t.openDirect()
	}
	return t, nil
}

// openDirect adds the O_DIRECT descriptor aligned writes go through, if the filesystem
// has O_DIRECT (without it every write goes through the page cache).
func (t *Target) openDirect() {
	if d, err := os.OpenFile(t.path, os.O_WRONLY|syscall.O_DIRECT|syscall.O_NOFOLLOW, 0); err == nil {
		t.direct = d
	}
}

// BufferFor is the size of the copy buffer for a file of size bytes: the whole file, one
// 4 KiB block more so that the read that meets its end is the one after it, and never
// above most. A buffer per small file costs its size, not most: a restore of 20,000 small
// tablespaces spent most of its CPU clearing and scanning 1 MiB buffers.
func BufferFor(size int64, most int) int {
	if size < 0 || size >= int64(most) {
		return most
	}
	return int(size) + BlockSize
}

var zeroBlock = make([]byte, BlockSize)

// WriteAt writes p at off, leaving all-zero aligned blocks unwritten for sparse targets.
func (t *Target) WriteAt(p []byte, off int64) error {
	if !t.sparse || off%BlockSize != 0 {
		return t.write(p, off)
	}
	return writeRuns(p, off, BlockSize, func(i int) bool {
		end := i + BlockSize
		return end <= len(p) && bytes.Equal(p[i:end], zeroBlock)
	}, t.write)
}

// writeRuns writes p (at off) piece by piece of step bytes, leaving out the pieces skip
// names (by their offset in p): each run of neighbouring pieces kept is one write.
func writeRuns(p []byte, off int64, step int, skip func(i int) bool, write func([]byte, int64) error) error {
	start := -1 // first byte of the run being gathered
	for i := 0; i < len(p); i += step {
		if skip(i) {
			if start >= 0 {
				if err := write(p[start:i], off+int64(start)); err != nil {
					return err
				}
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		return write(p[start:], off+int64(start))
	}
	return nil
}

func (t *Target) write(p []byte, off int64) error {
	f := t.f
	if t.direct != nil && aligned(p, off) {
		f = t.direct
	}
	if _, err := f.WriteAt(p, off); err != nil {
		return fmt.Errorf("write %s: %w", t.path, WrapWriteErr(err))
	}
	return nil
}

// PunchHole turns [off, off+n) into a hole (zeros), so that a sparse rewrite of the
// range, which skips zero blocks, leaves no old bytes behind.
func (t *Target) PunchHole(off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := unix.Fallocate(int(t.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err != nil {
		return fmt.Errorf("punch hole in %s: %w", t.path, err)
	}
	return nil
}

// Truncate sets the file size (a sparse tail stays a hole).
func (t *Target) Truncate(size int64) error {
	if err := t.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate %s: %w", t.path, WrapWriteErr(err))
	}
	return nil
}

// aligned reports whether an O_DIRECT write of p at off is possible.
func aligned(p []byte, off int64) bool {
	return len(p) > 0 && off%BlockSize == 0 && len(p)%BlockSize == 0 &&
		uintptr(unsafe.Pointer(&p[0]))%BlockSize == 0
}

// Close closes the file.
func (t *Target) Close() error {
	if t.direct != nil {
		t.direct.Close()
	}
	return t.f.Close()
}

// OpenRead opens a file for reading without following a symbolic link: the files
// ferry reads from a backup or a staging directory are never links.
func OpenRead(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, noFollowErr(err))
	}
	return f, nil
}

// noFollowErr names the refusal of O_NOFOLLOW (ELOOP) for what it is.
func noFollowErr(err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%w: it is a symbolic link, which ferry never follows inside a backup or a staging directory", err)
	}
	return err
}

// WrapWriteErr marks ENOSPC/EDQUOT as ErrDiskFull so callers can explain it.
func WrapWriteErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// CopyPlain copies src to a new file dst with a 1 MiB buffer, returning size and CRC-32C.
// Whole aligned chunks are written with O_DIRECT (the page cache is left alone and
// nothing is left to flush). onBytes, if set, is called with each chunk's length.
func CopyPlain(ctx context.Context, src, dst string, onBytes func(int64)) (int64, uint32, error) {
	return CopyLeaving(ctx, src, dst, onBytes, nil)
}

// Leave names the pages of a file that a copy leaves unwritten because a later writer
// fills every one of them (the incrementals of a chain): given the file's first bytes
// (at least 16 KiB unless the file is shorter), it returns the file's page size and a
// test of page numbers, or 0 and nil to write the whole file. A page size that is not
// a multiple of 4 KiB writes the whole file.
type Leave func(head []byte) (pageSize int, leave func(page uint32) bool)

// CopyLeaving is CopyPlain that does not write the pages leave names (nil: all are
// written): they are read and checksummed all the same, and stay holes in dst.
func CopyLeaving(ctx context.Context, src, dst string, onBytes func(int64), leave Leave) (int64, uint32, error) {
	in, err := OpenRead(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", src, err)
	}
	out, err := Create(dst, IsSparse(fi))
	if err != nil {
		return 0, 0, err
	}
	if fi.Size() > smallCopy {
		out.openDirect() // a small file's few writes go through the page cache, as cp's do: one open less
	}
	defer out.Close()
	buf := directio.AlignedBuffer(BufferFor(fi.Size(), 1<<20))
	var off int64
	var crc uint32
	var pages leftPages
	for {
		if err := ctx.Err(); err != nil {
			return off, crc, err
		}
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if off == 0 && leave != nil {
				pages = leftPagesOf(buf[:n], leave)
			}
			if err := pages.write(out, buf[:n], off); err != nil {
				return off, crc, err
			}
			crc = checksum.Update(crc, buf[:n])
			off += int64(n)
			if onBytes != nil {
				onBytes(int64(n))
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return off, crc, fmt.Errorf("read %s: %w", src, rerr)
		}
	}
	if !out.sparse && pages.size == 0 {
		return off, crc, nil // every byte written: the file ends at off
	}
	return off, crc, out.Truncate(off)
}

// smallCopy is the size up to which a copy writes through the page cache only.
const smallCopy = 1 << 20

// leftPages is what a Leave said of one file: its page size and the pages not written
// (a zero size: every byte is written).
type leftPages struct {
	size  int64
	leave func(page uint32) bool
}

// leftPages asks leave about the file whose first bytes are head.
func leftPagesOf(head []byte, leave Leave) leftPages {
	size, fn := leave(head)
	if size <= 0 || size%BlockSize != 0 || fn == nil {
		return leftPages{}
	}
	return leftPages{size: int64(size), leave: fn}
}

// write writes the bytes of p (at off in the file) that are not on a page left, in
// runs of neighbouring pages.
func (l leftPages) write(out *Target, p []byte, off int64) error {
	if l.size == 0 || off%l.size != 0 {
		return out.WriteAt(p, off)
	}
	return writeRuns(p, off, int(l.size), func(i int) bool {
		return i+int(l.size) <= len(p) && l.leave(uint32((off+int64(i))/l.size))
	}, out.WriteAt)
}

// SyncFS flushes the whole filesystem holding dir (one syncfs call instead of one fsync
// per file), then fsyncs dir.
func SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", dir, WrapWriteErr(err))
	}
	return d.Sync()
}

// FileCRC returns the size and CRC-32C of a file.
func FileCRC(path string) (int64, uint32, error) {
	f, err := OpenRead(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var size int64 = 4 << 20
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	buf := make([]byte, BufferFor(size, 4<<20))
	var crc uint32
	var n int64
	for {
		k, err := f.Read(buf)
		crc = checksum.Update(crc, buf[:k])
		n += int64(k)
		if err == io.EOF {
			return n, crc, nil
		}
		if err != nil {
			return n, crc, fmt.Errorf("read %s: %w", path, err)
		}
	}
}
