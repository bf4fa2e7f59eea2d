package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/redo"
)

// Ahead is a redo log parsed in the background before the datadir it rolls forward is
// complete: a restore parses the backup's log while it copies the data files, on a
// core the copy leaves idle, and a clone parses the log as its frames land, so that
// Dir (given it as Config.Ahead) only rolls the pages. Only an unencrypted log is
// parsed ahead; of one whose records do not fit one batch, only the first pass (the
// check of every record) is made ahead, and Dir parses the batches. Dir uses the result only if the log in its
// datadir is the same file (size and CRC-32C) and the parse succeeded; otherwise it
// parses its log itself, so an Ahead never changes what Dir does, only when the
// parsing happens.
type Ahead struct {
	path     string
	feed     *Feed // nil: the log at path is complete
	pageSize int
	cancel   context.CancelFunc
	done     chan struct{}
	// Set before done is closed.
	size int64
	crc  uint32
	b    *batch
	logs map[uint32]*spaceLog
	// reset, when b is nil, is the first pass of a log whose records do not fit one
	// batch: each page's last FREE_PAGE/INIT_PAGE (parser.reset), the log checked.
	reset map[redo.PageID]uint64
	final map[uint32]*spaceLog // with reset: each tablespace at the log's end
	ll    redo.LinearLog
	took  time.Duration
	err   error
}

// errAheadTooBig: the log's records do not fit one batch: Dir reads it in two passes,
// the first of which is made ahead.
var errAheadTooBig = errors.New("the log's records do not fit one batch")

// ParseAhead starts parsing the log at path (a backup's ib_logfile0) for a datadir of
// pageSize pages, holding at most memory bytes of records (0: Config's default).
// Close stops it.
func ParseAhead(ctx context.Context, path string, pageSize, memory int) *Ahead {
	return start(ctx, &Ahead{path: path, pageSize: pageSize}, memory)
}

// FollowAhead is ParseAhead on a log still being written: the parse reads each part
// of it once it is written, and ends once the log is complete.
func FollowAhead(ctx context.Context, feed *Feed, pageSize, memory int) *Ahead {
	return start(ctx, &Ahead{path: feed.Path(), feed: feed, pageSize: pageSize}, memory)
}

func start(ctx context.Context, h *Ahead, memory int) *Ahead {
	if h.pageSize == 0 {
		h.pageSize = 16384
	}
	memory = batchMemory(memory)
	ctx, h.cancel = context.WithCancel(ctx)
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		t0 := time.Now()
		if h.feed != nil {
			h.err = h.follow(ctx, memory)
		} else {
			h.err = h.parse(ctx, memory)
		}
		h.took = time.Since(t0)
	}()
	return h
}

// parse reads the log's size and CRC-32C, then parses it into one batch, or makes the
// first pass over a log whose records do not fit one.
func (h *Ahead) parse(ctx context.Context, memory int) error {
	var err error
	if h.size, h.crc, err = filecopy.FileCRC(h.path); err != nil {
		return err
	}
	f, err := os.Open(h.path)
	if err != nil {
		return err
	}
	defer f.Close()
	// Tried in one batch up to a log four times a batch, unlike Dir: records are from
	// a quarter to two thirds of a log's bytes, and a try that fails costs only a core
	// the copy leaves idle (and a batch of memory until it fails).
	if h.size <= 4*int64(memory) {
		if err := h.scan(ctx, f, memory, min(h.size, int64(memory))); !errors.Is(err, errAheadTooBig) {
			return err
		}
	}
	return h.check(ctx, f)
}

// follow parses the feed's log as it is written. The size and CRC-32C it records are
// of the bytes the parse read (Dir then checks its log is those and zeros after), or,
// if it did not read them in order, of the complete log.
func (h *Ahead) follow(ctx context.Context, memory int) error {
	r := &feedReader{ctx: ctx, feed: h.feed}
	err := h.scan(ctx, r, memory, int64(min(memory, defaultMemory))) // grown as records come: the log's size is not known
	r.close()
	if errors.Is(err, errAheadTooBig) { // the first pass, from the log's start again
		r = &feedReader{ctx: ctx, feed: h.feed}
		err = h.check(ctx, r)
		r.close()
	}
	if err != nil {
		return err
	}
	if !r.skipped {
		h.size, h.crc = r.next, r.crc
		return nil
	}
	if _, _, err := h.feed.Wait(ctx, math.MaxInt64); err != nil {
		return err
	}
	h.size, h.crc, err = filecopy.FileCRC(h.path)
	return err
}

// scan parses the log read through r into one batch of capacity about size.
func (h *Ahead) scan(ctx context.Context, r io.ReaderAt, memory int, size int64) error {
	p := &parser{b: newBatch(make([]byte, 0, size+redo.MTRSizeMax)), spaces: map[uint32]*spaceLog{},
		pageSize: h.pageSize, inject: faultpoint.Fails("apply-record")}
	var err error
	h.ll, err = redo.ScanLinearAt(r, h.path, nil, "", func(m redo.MTR) error {
		if err := p.add(m); err != nil {
			return err
		}
		if p.b.bytes() >= memory {
			return errAheadTooBig
		}
		return ctx.Err()
	})
	if err == nil { // a failed parse is never used: its records are let go now
		h.b, h.logs = p.b, p.spaces
	}
	return err
}

// check makes the first pass over the log read through r, as Dir's logEnd does: every
// record checked, each page's last FREE_PAGE/INIT_PAGE noted, the end found.
func (h *Ahead) check(ctx context.Context, r io.ReaderAt) error {
	reset, final := map[redo.PageID]uint64{}, map[uint32]*spaceLog{}
	p := &parser{b: newBatch(nil), spaces: final, pageSize: h.pageSize, reset: reset,
		inject: faultpoint.Fails("apply-record"), dry: true}
	ll, err := redo.ScanLinearAt(r, h.path, nil, "", func(m redo.MTR) error {
		if err := p.add(m); err != nil {
			return err
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	h.ll, h.reset, h.final = ll, reset, final
	return nil
}

// feedReader reads a Feed's log, waiting for each range to be written, and sums what
// it reads while the reads follow each other.
type feedReader struct {
	ctx     context.Context
	feed    *Feed
	f       *os.File
	next    int64  // where the reads so far end
	crc     uint32 // of the first next bytes
	skipped bool   // a read did not start where the one before ended
}

// ReadAt implements io.ReaderAt: it returns p whole once it is written, or what the
// complete log holds of it with io.EOF.
func (r *feedReader) ReadAt(p []byte, off int64) (int, error) {
	written, complete, err := r.feed.Wait(r.ctx, off+int64(len(p)))
	if err != nil {
		return 0, err
	}
	if r.f == nil {
		if r.f, err = os.Open(r.feed.Path()); err != nil {
			return 0, err
		}
	}
	n := int(min(int64(len(p)), max(0, written-off)))
	got, err := r.f.ReadAt(p[:n], off)
	if errors.Is(err, io.EOF) { // written as a hole past the file's current end
		clear(p[got:n])
		got, err = n, nil
	}
	if err != nil {
		return got, err
	}
	if off != r.next {
		r.skipped = true
	}
	r.crc, r.next = checksum.Update(r.crc, p[:n]), off+int64(n)
	if n < len(p) {
		if !complete {
			return n, fmt.Errorf("the log's writer reported %d bytes written of the %d waited for (internal error)", written, off+int64(len(p)))
		}
		return n, io.EOF
	}
	return n, nil
}

func (r *feedReader) close() {
	if r.f != nil {
		r.f.Close()
	}
}

// Close stops a parse still running and waits for it to end.
func (h *Ahead) Close() {
	h.cancel()
	<-h.done
}

// take waits for the parse and returns it if it is of the log at logPath, parsed for
// pageSize pages without error; ok false (and why, for the log) otherwise.
func (h *Ahead) take(ctx context.Context, logPath string, pageSize int) (ok bool, why string, err error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return false, "", ctx.Err()
	}
	switch {
	case h.err != nil:
		return false, "parsing ahead: " + h.err.Error(), nil
	case h.pageSize != pageSize:
		return false, fmt.Sprintf("parsed ahead for %d-byte pages, not %d", h.pageSize, pageSize), nil
	}
	same, err := sameLog(logPath, h.size, h.crc)
	if err != nil {
		return false, "", fmt.Errorf("%w: %w", errUnsupported, err)
	}
	if !same {
		return false, "the log in the copy is not the one parsed ahead", nil
	}
	return true, "", nil
}

// sameLog tells whether the log at path is size bytes with CRC-32C crc, followed by
// nothing but zeros (a restore pads the log it recovers to whole MiB).
func sameLog(path string, size int64, crc uint32) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	var got uint32
	var off int64
	for {
		n, err := f.Read(buf)
		b := buf[:n]
		if head := min(int64(n), max(0, size-off)); head > 0 {
			got = checksum.Update(got, b[:head])
			b = b[head:]
		}
		if slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
			return false, nil
		}
		off += int64(n)
		if err == io.EOF {
			return off >= size && got == crc, nil
		}
		if err != nil {
			return false, err
		}
	}
}
