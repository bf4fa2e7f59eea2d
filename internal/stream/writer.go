// Package stream writes a backup as one xbstream (mbstream-compatible) and unpacks such
// a stream into a directory. Each file of the stream is one pipeline unit: compressed in
// independent blocks by a pool of workers, so one large file does not serialize the
// stream, and encrypted per file; a fixed pool of block buffers bounds the memory.
// docs/xbstream.md has the layout.
package stream

import (
	"bufio"
	"fmt"
	"io"
	"sync"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/xbstream"
)

// DefaultBlockSize is the unit of compression: one standard frame per block.
const DefaultBlockSize = pipeline.DefaultBlockSize

// Options configures a Writer: the encoding pipeline's options.
type Options = pipeline.Options

// Stored describes how one file went into the stream.
type Stored struct {
	Name string // name in the stream (the path plus .zst/.lz4/.age)
	Size int64  // bytes of the stored form
}

// Writer writes files into an xbstream on an io.Writer. Create, the Files' methods and
// Close may be called from several goroutines.
type Writer struct {
	enc *pipeline.Encoder
	out *bufio.Writer
	xb  *xbstream.Writer

	mu     sync.Mutex
	stored map[string]Stored
}

// NewWriter starts the workers of a stream written to w.
func NewWriter(w io.Writer, o Options) (*Writer, error) {
	enc, err := pipeline.NewEncoder(o)
	if err != nil {
		return nil, err
	}
	out := bufio.NewWriterSize(w, 1<<20)
	return &Writer{enc: enc, out: out, xb: xbstream.NewWriter(out), stored: map[string]Stored{}}, nil
}

// Err returns the first error met by any file.
func (x *Writer) Err() error { return x.enc.Err() }

// StoredAs returns how the closed file at path was stored.
func (x *Writer) StoredAs(path string) (Stored, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	st, ok := x.stored[path]
	return st, ok
}

// Close waits for the workers and flushes the stream. Files must be closed first.
func (x *Writer) Close() error {
	if err := x.enc.Close(); err != nil {
		return err
	}
	if err := x.out.Flush(); err != nil {
		return fmt.Errorf("write stream: %w", err)
	}
	return nil
}

// File is one file being written into the stream, strictly in order.
type File struct {
	x    *Writer
	path string
	name string
	u    *pipeline.Unit
	out  *chunker
}

// Create starts a file of the backup at path (relative, '/'-separated).
func (x *Writer) Create(path string) (*File, error) { return x.create(path, true) }

// CreateUncompressed starts a file that is not compressed (encrypted if the stream
// is): small metadata a DBA may want to read after mbstream -x.
func (x *Writer) CreateUncompressed(path string) (*File, error) { return x.create(path, false) }

func (x *Writer) create(path string, compress bool) (*File, error) {
	o := x.enc.Options()
	comp := codec.None
	if compress {
		comp = o.Compression
	}
	name := codec.StoredName(path, comp, o.Encrypted())
	f := &File{x: x, path: path, name: name, out: &chunker{xb: x.xb, name: name, max: o.BlockSize}}
	u, err := x.enc.Start("stream "+path, f.out, compress)
	if err != nil {
		return nil, err
	}
	f.u = u
	return f, nil
}

// Path is the file's path in the backup.
func (f *File) Path() string { return f.path }

// Write appends p to the file.
func (f *File) Write(p []byte) (int, error) { return f.u.Write(p) }

// WriteAt appends p, which must start where the file ends (streams are sequential).
func (f *File) WriteAt(p []byte, off int64) error {
	if off != f.u.Size() {
		return fmt.Errorf("stream %s: write at %d but the file ends at %d (internal error: streams are written in order)", f.path, off, f.u.Size())
	}
	_, err := f.u.Write(p)
	return err
}

// Close writes what is left of the file and its end-of-file chunk.
func (f *File) Close() error {
	err := f.u.Close()
	if err == nil {
		err = f.out.flush()
	}
	// The caller may keep the File until the whole backup is copied (the engine holds
	// every file's state): what it gathered must not stay with it, or a stream of many
	// small files holds each one's bytes until the end.
	f.out.buf = nil
	if err == nil {
		err = f.x.xb.WriteEOF(f.name)
	}
	if err != nil {
		return f.x.enc.Fail(fmt.Errorf("stream %s: %w", f.path, err))
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
