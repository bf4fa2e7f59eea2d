package stream

import (
	"fmt"
	"io"

	"github.com/ferry-backup/ferry/internal/codec"
)

// File is one file being written into the stream, strictly in order.
type File struct {
	x     *Writer
	path  string
	name  string
	size  int64
	cur   *block
	queue chan *block // blocks in file order, waiting for their worker
	done  chan error  // result of the emitter
	out   *chunker
	raw   bool // bytes go into the stream as they are
	// compress: blocks go through the workers' compressor (else they only keep the
	// file's order on their way to the encryption).
	compress bool
}

// Create starts a file of the backup at path (relative, '/'-separated).
func (x *Writer) Create(path string) (*File, error) { return x.create(path, x.opts.Compression) }

// CreateUncompressed starts a file that is not compressed (encrypted if the stream
// is): small metadata a DBA may want to read after mbstream -x.
func (x *Writer) CreateUncompressed(path string) (*File, error) { return x.create(path, codec.None) }

func (x *Writer) create(path string, comp codec.Compression) (*File, error) {
	if err := x.Err(); err != nil {
		return nil, err
	}
	encrypted := len(x.opts.Recipients) > 0
	name := codec.StoredName(path, comp, encrypted)
	f := &File{x: x, path: path, name: name, out: &chunker{xb: x.xb, name: name, max: x.opts.BlockSize}}
	f.raw = comp == codec.None && !encrypted
	if f.raw {
		return f, nil
	}
	f.compress = comp != codec.None
	f.queue = make(chan *block, 2*x.opts.Workers)
	f.done = make(chan error, 1)
	var sink io.Writer = f.out
	var enc io.WriteCloser
	if len(x.opts.Recipients) > 0 {
		w, err := codec.Encrypt(f.out, x.opts.Recipients)
		if err != nil {
			return nil, err
		}
		sink, enc = w, w
	}
	go f.emit(sink, enc)
	return f, nil
}

// Path is the file's path in the backup.
func (f *File) Path() string { return f.path }

// Write appends p to the file.
func (f *File) Write(p []byte) (int, error) {
	if f.raw {
		return f.writeRaw(p)
	}
	n := 0
	for len(p) > 0 {
		if f.cur == nil {
			f.cur = f.x.getBlock()
		}
		k := copy(f.cur.in[f.cur.n:], p)
		f.cur.n += k
		n += k
		p = p[k:]
		if f.cur.n == len(f.cur.in) {
			if err := f.submit(); err != nil {
				return n, err
			}
		}
	}
	f.size += int64(n)
	return n, nil
}

// WriteAt appends p, which must start where the file ends (streams are sequential).
func (f *File) WriteAt(p []byte, off int64) error {
	if off != f.size {
		return fmt.Errorf("stream %s: write at %d but the file ends at %d (internal error: streams are written in order)", f.path, off, f.size)
	}
	_, err := f.Write(p)
	return err
}

// writeRaw puts p into the stream as payload chunks at once.
func (f *File) writeRaw(p []byte) (int, error) {
	if err := f.x.Err(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), f.x.opts.BlockSize)
		if err := f.out.chunk(p[:k]); err != nil {
			return n, f.x.fail(err)
		}
		n += k
		p = p[k:]
	}
	f.size += int64(n)
	return n, nil
}

// submit hands the current block to the workers, keeping the file's order.
func (f *File) submit() error {
	b := f.cur
	f.cur = nil
	if err := f.x.Err(); err != nil {
		f.x.putBlock(b)
		return err
	}
	b.compress = f.compress
	f.queue <- b
	f.x.jobs <- b
	return nil
}

// emit writes the file's blocks in order as they come back from the workers, through
// the encryption if any, then ends the file.
func (f *File) emit(sink io.Writer, enc io.WriteCloser) {
	var err error
	for b := range f.queue {
		<-b.ready
		if err == nil {
			err = b.err
		}
		if err == nil {
			if _, werr := sink.Write(b.out); werr != nil {
				err = werr
			}
		}
		if err != nil {
			f.x.fail(fmt.Errorf("stream %s: %w", f.path, err))
		}
		f.x.putBlock(b)
	}
	if err == nil && enc != nil {
		err = enc.Close()
	}
	if err == nil {
		err = f.out.flush()
	}
	f.done <- err
}

// Close writes what is left of the file and its end-of-file chunk.
func (f *File) Close() error {
	var err error
	if !f.raw {
		if f.cur != nil && f.cur.n > 0 {
			err = f.submit()
		} else if f.cur != nil {
			f.x.putBlock(f.cur)
			f.cur = nil
		}
		close(f.queue)
		if eerr := <-f.done; err == nil {
			err = eerr
		}
	}
	if err == nil {
		err = f.x.xb.WriteEOF(f.name)
	}
	if err != nil {
		return f.x.fail(fmt.Errorf("stream %s: %w", f.path, err))
	}
	f.x.mu.Lock()
	f.x.stored[f.path] = Stored{Name: f.name, Size: f.out.off}
	f.x.mu.Unlock()
	return nil
}

// chunker turns the stored bytes of one file into payload chunks of up to max bytes.
// Encrypted output arrives in small pieces and is gathered first; compressed frames
// are written as they come.
type chunker struct {
	xb interface {
		WritePayload(string, uint64, []byte) error
	}
	name string
	max  int
	off  int64
	buf  []byte
}

func (c *chunker) Write(p []byte) (int, error) {
	if len(c.buf) == 0 && len(p) >= c.max/2 {
		return len(p), c.chunk(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= c.max {
		return len(p), c.flush()
	}
	return len(p), nil
}

func (c *chunker) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.chunk(c.buf)
	c.buf = c.buf[:0]
	return err
}

func (c *chunker) chunk(p []byte) error {
	if err := c.xb.WritePayload(c.name, uint64(c.off), p); err != nil {
		return err
	}
	c.off += int64(len(p))
	return nil
}
