// Package stream writes a backup as one xbstream (mbstream-compatible) and unpacks such
// a stream into a directory. Files are compressed in independent blocks by a pool of
// workers, so one large file does not serialize the stream, and encrypted per file;
// a fixed pool of block buffers bounds the memory. docs/xbstream.md has the layout.
package stream

import (
	"bufio"
	"fmt"
	"io"
	"sync"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/xbstream"
)

// DefaultBlockSize is the unit of compression: one standard frame per block.
const DefaultBlockSize = 1 << 20

// Options configures a Writer.
type Options struct {
	Compression codec.Compression
	Level       int             // 0: the codec's default
	Recipients  []age.Recipient // empty: not encrypted
	Workers     int             // compression workers; default 1
	MaxMemory   int64           // bytes for block buffers (each block costs two buffers)
	BlockSize   int             // default DefaultBlockSize
	OpenFiles   int             // files written at once (each may hold a partial block)
}

// Stored describes how one file went into the stream.
type Stored struct {
	Name string // name in the stream (the path plus .zst/.lz4/.age)
	Size int64  // bytes of the stored form
}

// Writer writes files into an xbstream on an io.Writer. Create, the Files' methods and
// Close may be called from several goroutines.
type Writer struct {
	opts Options
	out  *bufio.Writer
	xb   *xbstream.Writer
	comp codec.Compressor
	// tokens bound the blocks in use (the memory budget); free keeps released blocks,
	// most recent first, so a light load reuses a few warm buffers instead of touching
	// the whole budget.
	tokens chan struct{}
	free   []*block
	jobs   chan *block
	wg     sync.WaitGroup

	mu     sync.Mutex
	err    error
	stored map[string]Stored
}

// block is one unit of a file on its way through the pipeline.
type block struct {
	in, out  []byte
	n        int
	compress bool
	ready    chan struct{}
	err      error
}

// MinMemory is the smallest budget that lets o's open files and workers progress.
func (o Options) MinMemory() int64 {
	return int64(o.OpenFiles+2*o.Workers+4) * 2 * int64(o.blockSize())
}

// Check refuses a memory budget too small for the options.
func (o Options) Check() error {
	if o.MaxMemory < o.MinMemory() {
		return fmt.Errorf("--max-memory %d MiB is too small for %d parallel files: allow at least %d MiB", o.MaxMemory>>20, o.OpenFiles, (o.MinMemory()+(1<<20)-1)>>20)
	}
	return nil
}

func (o Options) blockSize() int {
	if o.BlockSize <= 0 {
		return DefaultBlockSize
	}
	return o.BlockSize
}

// NewWriter starts the workers of a stream written to w.
func NewWriter(w io.Writer, o Options) (*Writer, error) {
	o.Workers = max(o.Workers, 1)
	o.BlockSize = o.blockSize()
	if err := o.Check(); err != nil {
		return nil, err
	}
	comp, err := codec.NewCompressor(o.Compression, o.Level, o.Workers)
	if err != nil {
		return nil, err
	}
	out := bufio.NewWriterSize(w, 1<<20)
	x := &Writer{opts: o, out: out, xb: xbstream.NewWriter(out), comp: comp, stored: map[string]Stored{}}
	n := int(o.MaxMemory / int64(2*o.BlockSize))
	x.tokens = make(chan struct{}, n)
	for range n {
		x.tokens <- struct{}{}
	}
	x.jobs = make(chan *block, n)
	for range o.Workers {
		x.wg.Add(1)
		go x.work()
	}
	return x, nil
}

// work compresses blocks until the job queue is closed.
func (x *Writer) work() {
	defer x.wg.Done()
	for b := range x.jobs {
		if !b.compress {
			b.out = b.in[:b.n]
		} else {
			b.out, b.err = x.comp.Compress(b.out, b.in[:b.n])
		}
		close(b.ready)
	}
}

// getBlock takes a block (waiting while the budget is used up).
func (x *Writer) getBlock() *block {
	<-x.tokens
	x.mu.Lock()
	b := &block{}
	if k := len(x.free); k > 0 {
		b, x.free = x.free[k-1], x.free[:k-1]
	}
	x.mu.Unlock()
	if cap(b.in) < x.opts.BlockSize {
		b.in = make([]byte, x.opts.BlockSize)
	}
	b.in, b.n, b.err = b.in[:x.opts.BlockSize], 0, nil
	b.ready = make(chan struct{})
	return b
}

func (x *Writer) putBlock(b *block) {
	if !b.compress {
		b.out = nil // it aliased b.in
	}
	x.mu.Lock()
	x.free = append(x.free, b)
	x.mu.Unlock()
	x.tokens <- struct{}{}
}

// fail records the first error of the stream.
func (x *Writer) fail(err error) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err == nil {
		x.err = err
	}
	return x.err
}

// Err returns the first error met by any file.
func (x *Writer) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// Stored returns how each closed file was stored, by path.
func (x *Writer) Stored() map[string]Stored {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]Stored, len(x.stored))
	for k, v := range x.stored {
		out[k] = v
	}
	return out
}

// Close waits for the workers and flushes the stream. Files must be closed first.
func (x *Writer) Close() error {
	close(x.jobs)
	x.wg.Wait()
	if err := x.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.out.Flush(); err != nil {
		return fmt.Errorf("write stream: %w", err)
	}
	return nil
}
