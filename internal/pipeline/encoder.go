// Package pipeline is the encode stage shared by every end of a backup: bytes of a file
// are cut into independent blocks, compressed in parallel by a pool of workers into
// standard frames, put back in order, encrypted (one age file per unit) and written to
// a sink. A fixed pool of block buffers bounds the memory however slow the sink is.
// An xbstream file and a repository part are each one Unit.
package pipeline

import (
	"sync"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/setting"
)

// DefaultBlockSize is the unit of compression: one standard frame per block.
const DefaultBlockSize = 1 << 20

// Options configures an Encoder.
type Options struct {
	Compression codec.Compression
	Level       int             // 0: the codec's default
	Recipients  []age.Recipient // empty: not encrypted
	Workers     int             // compression workers; default 1
	MaxMemory   int64           // bytes for block buffers (each block costs two buffers)
	BlockSize   int             // default DefaultBlockSize
	OpenFiles   int             // units written at once (each may hold a partial block)
}

// MinMemory is the smallest budget that lets o's open units and workers progress.
func (o Options) MinMemory() int64 {
	return int64(o.OpenFiles+2*max(o.Workers, 1)+4) * 2 * int64(o.blockSize())
}

// Check refuses a memory budget too small for the options.
func (o Options) Check() error {
	if o.MaxMemory < o.MinMemory() {
		return setting.Errorf("%s %d MiB is too small for %d parallel files: allow at least %d MiB", setting.MaxMemory, o.MaxMemory>>20, o.OpenFiles, (o.MinMemory()+(1<<20)-1)>>20)
	}
	return nil
}

// Encrypted says whether units are encrypted.
func (o Options) Encrypted() bool { return len(o.Recipients) > 0 }

func (o Options) blockSize() int {
	if o.BlockSize <= 0 {
		return DefaultBlockSize
	}
	return o.BlockSize
}

// Encoder owns the compression workers and the block pool. Start, the Units' methods
// and Close may be called from several goroutines.
type Encoder struct {
	opts Options
	comp codec.Compressor
	// tokens bound the blocks in use (the memory budget); free keeps released blocks,
	// most recent first, so a light load reuses a few warm buffers instead of touching
	// the whole budget.
	tokens chan struct{}
	free   []*block
	jobs   chan *block
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error
}

// block is one piece of a unit on its way through the workers.
type block struct {
	in, out  []byte
	n        int
	compress bool
	ready    chan struct{}
	err      error
}

// NewEncoder starts the workers.
func NewEncoder(o Options) (*Encoder, error) {
	o.Workers = max(o.Workers, 1)
	o.BlockSize = o.blockSize()
	if err := o.Check(); err != nil {
		return nil, err
	}
	comp, err := codec.NewCompressor(o.Compression, o.Level, o.Workers)
	if err != nil {
		return nil, err
	}
	e := &Encoder{opts: o, comp: comp}
	n := int(o.MaxMemory / int64(2*o.BlockSize))
	e.tokens = make(chan struct{}, n)
	for range n {
		e.tokens <- struct{}{}
	}
	e.jobs = make(chan *block, n)
	for range o.Workers {
		e.wg.Add(1)
		go e.work()
	}
	return e, nil
}

// Options returns the encoder's options (with defaults applied).
func (e *Encoder) Options() Options { return e.opts }

// work compresses blocks until the job queue is closed.
func (e *Encoder) work() {
	defer e.wg.Done()
	for b := range e.jobs {
		if !b.compress {
			b.out = b.in[:b.n]
		} else {
			b.out, b.err = e.comp.Compress(b.out, b.in[:b.n])
		}
		close(b.ready)
	}
}

// getBlock takes a block (waiting while the budget is used up).
func (e *Encoder) getBlock() *block {
	<-e.tokens
	e.mu.Lock()
	b := &block{}
	if k := len(e.free); k > 0 {
		b, e.free = e.free[k-1], e.free[:k-1]
	}
	e.mu.Unlock()
	if cap(b.in) < e.opts.BlockSize {
		b.in = make([]byte, e.opts.BlockSize)
	}
	b.in, b.n, b.err = b.in[:e.opts.BlockSize], 0, nil
	b.ready = make(chan struct{})
	return b
}

func (e *Encoder) putBlock(b *block) {
	if !b.compress {
		b.out = nil // it aliased b.in
	}
	e.mu.Lock()
	e.free = append(e.free, b)
	e.mu.Unlock()
	e.tokens <- struct{}{}
}

// Fail records the first error of the whole encoding; later writes return it.
func (e *Encoder) Fail(err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
	return e.err
}

// Err returns the first error met by any unit.
func (e *Encoder) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Close stops the workers once every unit is closed and returns the first error.
func (e *Encoder) Close() error {
	close(e.jobs)
	e.wg.Wait()
	return e.Err()
}
