package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/sink"
)

// copySegment copies one segment of an InnoDB file: large O_DIRECT reads, every page
// validated (torn pages re-read), written to the same offset of the target with
// O_DIRECT by a writer goroutine while the next chunk is read.
func (j *job) copySegment(ctx context.Context, ij *innoJob, s *segment) error {
	in, err := directio.Open(ij.src.Abs)
	if errors.Is(err, os.ErrNotExist) {
		s.vanished = true // dropped or renamed by DDL: reconciled under BLOCK_DDL
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", ij.src.Abs, err)
	}
	defer in.Close()
	if err := j.openOut(ij); err != nil {
		return err
	}
	w := j.startWriter(ij.out)
	rerr := j.readSegment(ctx, in, ij, s, w.chunks)
	close(w.chunks)
	if werr := <-w.done; rerr == nil {
		rerr = werr
	}
	return rerr
}

// chunk is a validated buffer waiting to be written at off.
type chunk struct {
	buf []byte
	n   int
	off int64
}

type chunkWriter struct {
	chunks chan chunk
	done   chan error
}

// startWriter writes chunks in order and returns their buffers to the pool. The channel
// is unbuffered, so a worker holds at most two buffers: one being read, one being written.
func (j *job) startWriter(out sink.File) chunkWriter {
	w := chunkWriter{chunks: make(chan chunk), done: make(chan error, 1)}
	go func() {
		var err error
		for c := range w.chunks {
			if err == nil {
				err = out.WriteAt(c.buf[:c.n], c.off)
			}
			j.bufs <- c.buf
		}
		w.done <- err
	}()
	return w
}

// readSegment reads and validates the segment chunk by chunk, passing each to out.
func (j *job) readSegment(ctx context.Context, in *directio.File, ij *innoJob, s *segment, out chan<- chunk) error {
	off, end := s.off, s.off+s.len
	free := j.newFreeMap(ij) // free pages stored as zeros: freepages.go
	for s.len < 0 || off < end {
		buf := <-j.bufs
		want := len(buf)
		if s.len >= 0 {
			want = int(min(int64(want), end-off))
		}
		n, err := j.readChunkFree(ctx, in, ij, free, buf[:want], off)
		if n > 0 {
			s.crc = checksum.Update(s.crc, buf[:n])
			s.size += int64(n)
			j.prog.Add(int64(n))
			out <- chunk{buf: buf, n: n, off: off}
			off += int64(n)
		} else {
			j.bufs <- buf
		}
		if err != nil || n < want {
			return err
		}
	}
	return nil
}

// readChunk fills buf from off with whole, validated pages; n < len(buf) at end of file.
func (j *job) readChunk(ctx context.Context, in *directio.File, ij *innoJob, buf []byte, off int64) (int, error) {
	n, err := j.readRaw(ctx, in, ij, buf, off)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := j.validate(ctx, in, ij, buf[:n], off); err != nil {
		return 0, err
	}
	return n, nil
}

// readRaw fills buf from off with whole pages, not validated, within --max-rate.
func (j *job) readRaw(ctx context.Context, in *directio.File, ij *innoJob, buf []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := j.throttle(ctx, len(buf)); err != nil {
		return 0, err
	}
	n, rerr := in.ReadAt(buf, off)
	n -= n % ij.page // a partial page at EOF is being extended: redo covers it
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		return 0, fmt.Errorf("read %s at %d: %w", ij.src.Abs, off, rerr)
	}
	return n, nil
}

// validate checks every page of b (read at off), re-reading pages that fail; a page
// still failing after pageRetries re-reads makes the backup fail.
func (j *job) validate(ctx context.Context, in *directio.File, ij *innoJob, b []byte, off int64) error {
	if ij.checker == nil {
		return nil
	}
	ps := ij.page
	for i := 0; i < len(b); i += ps {
		pageNo := uint32((off+int64(i))/int64(ps)) + ij.src.Base
		if err := ij.checker.Check(b[i:i+ps], pageNo); err != nil {
			var ue *innodb.UnsupportedPageError
			if errors.As(err, &ue) { // not torn: a feature; no re-read mends it
				return fmt.Errorf("%s: %w: ferry does not copy such tables yet; rebuild the table without it (e.g. COMPRESSION='None' and OPTIMIZE TABLE) or use Percona XtraBackup", ij.src.Rel, err)
			}
			if err := j.reread(ctx, in, ij, b[i:i+ps], off+int64(i), pageNo, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// reread re-reads one torn page until it validates, replacing it in page.
func (j *job) reread(ctx context.Context, in *directio.File, ij *innoJob, page []byte, off int64, pageNo uint32, first error) error {
	ps := len(page)
	aoff := off &^ (directio.Align - 1)
	buf := directio.AlignedBuffer(int(off-aoff) + ps)
	last := first
	for try := 1; try <= pageRetries; try++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pageRetryPause):
		}
		n, err := in.ReadAt(buf, aoff)
		if n < len(buf) {
			return fmt.Errorf("re-read page %d of %s: %w", pageNo, ij.src.Rel, err)
		}
		p := buf[off-aoff:]
		if last = ij.checker.Check(p, pageNo); last == nil {
			copy(page, p)
			j.stats.rereads.Add(int64(try))
			return nil
		}
	}
	var ce *innodb.CorruptPageError
	if errors.As(last, &ce) {
		return fmt.Errorf("%s: page %d is corrupt (%s) after %d re-reads: the source tablespace is damaged; run CHECK TABLE and repair it before backing up", ij.src.Rel, pageNo, ce.Reason, pageRetries)
	}
	return fmt.Errorf("%s: page %d failed validation after %d re-reads: %w", ij.src.Rel, pageNo, pageRetries, last)
}

// throttle waits until n more bytes may be read under --max-rate.
func (j *job) throttle(ctx context.Context, n int) error {
	j.stats.read.Add(int64(n))
	if j.limiter == nil {
		return nil
	}
	for n > 0 {
		k := min(n, j.limiter.Burst())
		if err := j.limiter.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
