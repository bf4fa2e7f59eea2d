package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/xbstream"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// perFile is what a file being decoded holds besides its queued payloads: its 1 MiB
// copy buffer and a decoder (a zstd window of at most codec.MaxZstdWindow and its
// block, or an lz4 block).
const perFile = copyBuf + codec.MaxDecoderMemory/2

// minOpen is the fewest files a restore decodes at once, whatever the budget: ferry's
// backup interleaves --parallel + 8 files, mariadb-backup --parallel.
const minOpen = 16

// OpenLimit is how many files a stream may have open at once under a memory budget:
// half the budget over perFile, at least minOpen. A restore thus holds at most the
// budget plus minOpen×perFile, whatever the stream does.
func OpenLimit(budget int64) int { return max(minOpen, int(budget/2/perFile)) }

// UnpackOptions configures Unpack.
type UnpackOptions struct {
	Identities []age.Identity // for encrypted files
	MaxMemory  int64          // bytes of stream data buffered between reader and files
	Progress   func(n int64)  // called with decoded bytes written
	// Keep, if set, names the files to write; the others are decoded and checked
	// (their sums are in Unpacked) but not written (a table restore needs few).
	Keep func(path string) bool
	// Follow, if set, names files a reader follows as they are written (nil: not
	// followed), told of each write once it is in the file.
	Follow func(path string) Follower
}

// Follower is told how a file being unpacked is written (apply.Feed is one).
type Follower interface {
	Wrote(off, n int64)  // n bytes written at off
	Complete(size int64) // the file is whole: size bytes
	Fail(err error)      // the file will not be completed
}

// FileSum is what was written for one file.
type FileSum struct {
	Size   int64
	CRC    uint32 // CRC-32C of the decoded bytes
	Stored string // name in the stream
}

// Unpacked is the result of Unpack.
type Unpacked struct {
	Files map[string]FileSum // by decoded path
}

// Unpack reads an xbstream (ferry's or mariadb-backup's) from r and writes every file,
// decrypted and decompressed, under dir, each file by its own goroutine as its chunks
// arrive. Every chunk's CRC-32 is checked; a truncated, damaged or out-of-order stream,
// a wrong key or a bad frame is an error naming the file (and offset where known).
func Unpack(ctx context.Context, r io.Reader, dir string, o UnpackOptions) (*Unpacked, error) {
	if o.MaxMemory <= 0 {
		o.MaxMemory = 256 << 20
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g, gctx := errgroup.WithContext(ctx)
	// Half the budget holds payloads on their way to the files, the other half the
	// files open at once (each a copy buffer and a decoder): a stream that opens more
	// than that is refused instead of growing memory per file.
	o.MaxMemory = max(o.MaxMemory/2, 1<<20)
	maxOpen := OpenLimit(o.MaxMemory * 2)
	u := &unpacker{dir: dir, o: o, ctx: gctx, g: g, mem: semaphore.NewWeighted(o.MaxMemory), maxOpen: maxOpen,
		writers: semaphore.NewWeighted(int64(maxOpen)), bufs: make(chan []byte, maxOpen),
		open: map[string]*inFile{}, seen: map[string]bool{}, res: &Unpacked{Files: map[string]FileSum{}}}
	err := u.dispatch(xbstream.NewReader(r))
	if err != nil {
		cancel(err)
	}
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return nil, err
	}
	return u.res, nil
}

type unpacker struct {
	dir  string
	o    UnpackOptions
	ctx  context.Context
	g    *errgroup.Group
	mem  *semaphore.Weighted
	open map[string]*inFile
	seen map[string]bool
	n    int
	// maxOpen bounds the files open at once (OpenLimit), and writers the files being
	// written, whether the stream has closed them or not: a file the stream has ended
	// may still be decoding and writing its last payloads, and without the bound a
	// stream of many small files would start a writer (a copy buffer and a decoder) per
	// file faster than the disk finishes them.
	maxOpen int
	writers *semaphore.Weighted
	// bufs keeps the copy buffers of writers that finished, for the next ones.
	bufs chan []byte

	mu  sync.Mutex
	res *Unpacked
}

// inFile is a file whose chunks are arriving.
type inFile struct {
	ch   chan []byte
	next uint64 // offset the next payload must have
}

// dispatch reads chunks and hands each payload to its file's goroutine.
func (u *unpacker) dispatch(x *xbstream.Reader) error {
	for {
		if err := u.ctx.Err(); err != nil {
			return nil // a file failed: g.Wait returns its error
		}
		c, err := x.Next()
		if err == io.EOF {
			return u.atEnd()
		}
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		f, err := u.file(c.Path)
		if err != nil {
			if u.ctx.Err() != nil {
				return nil // a file failed while this one waited for a writer
			}
			return err
		}
		if c.Type == xbstream.TypeEOF {
			close(f.ch)
			delete(u.open, c.Path)
			continue
		}
		if c.Offset != f.next {
			return fmt.Errorf("%w: %s: chunk at offset %d, expected %d (out of order or missing data)", xbstream.ErrCorrupt, c.Path, c.Offset, f.next)
		}
		f.next += uint64(len(c.Payload))
		if err := u.send(f, c.Payload); err != nil {
			return nil
		}
	}
}

// send copies a payload into the budget and queues it for its file.
func (u *unpacker) send(f *inFile, p []byte) error {
	n := min(int64(len(p)), u.o.MaxMemory)
	if err := u.mem.Acquire(u.ctx, n); err != nil {
		return err
	}
	b := append([]byte(nil), p...)
	select {
	case f.ch <- b:
		return nil
	case <-u.ctx.Done():
		u.mem.Release(n)
		return u.ctx.Err()
	}
}

// file returns the open file of a stream path, starting its writer on first sight.
func (u *unpacker) file(name string) (*inFile, error) {
	if f, ok := u.open[name]; ok {
		return f, nil
	}
	if u.seen[name] {
		return nil, fmt.Errorf("%w: %s appears twice in the stream", xbstream.ErrCorrupt, name)
	}
	if strings.HasSuffix(name, ".qp") || strings.HasSuffix(name, ".xbcrypt") {
		return nil, fmt.Errorf("%s is compressed or encrypted by mariadb-backup/xtrabackup (qpress, xbcrypt), which ferry does not read: unpack with mbstream -x and mariadb-backup --decompress, then restore the directory", name)
	}
	if len(u.open) >= u.maxOpen {
		return nil, setting.Errorf("the stream has more than %d files open at once, which %s %d MiB allows (each needs up to %d MiB to decode): it is not a ferry or mariadb-backup stream, or the backup ran with a large %s; raise %s", u.maxOpen, setting.MaxMemory, 2*u.o.MaxMemory>>20, perFile>>20, setting.Parallel, setting.MaxMemory)
	}
	path, comp, enc := codec.ParseStoredName(name)
	dst, err := xbstream.SafePath(u.dir, path)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	_, done := u.res.Files[path]
	u.mu.Unlock()
	if done || u.pathOpen(path) {
		return nil, fmt.Errorf("%w: %s appears twice in the stream", xbstream.ErrCorrupt, path)
	}
	// Fewer than maxOpen files are open in the stream, so a writer is free or held by
	// a file the stream has ended, which finishes without the dispatcher.
	if err := u.writers.Acquire(u.ctx, 1); err != nil {
		return nil, err
	}
	u.seen[name] = true
	u.n++
	f := &inFile{ch: make(chan []byte, 4)}
	u.open[name] = f
	u.g.Go(func() error {
		defer u.writers.Release(1)
		sum, err := u.write(f, dst, path, comp, enc)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		sum.Stored = name
		u.mu.Lock()
		u.res.Files[path] = sum
		u.mu.Unlock()
		return nil
	})
	return f, nil
}

func (u *unpacker) pathOpen(path string) bool {
	for name := range u.open {
		if p, _, _ := codec.ParseStoredName(name); p == path {
			return true
		}
	}
	return false
}

// atEnd checks the stream closed every file it opened and was not empty.
func (u *unpacker) atEnd() error {
	for name := range u.open {
		return fmt.Errorf("%w: the stream ends before the end of %s (truncated: the backup was interrupted or the connection dropped)", xbstream.ErrCorrupt, name)
	}
	if u.n == 0 {
		return errors.New("the stream is empty: nothing to restore (did the backup command fail?)")
	}
	return nil
}
