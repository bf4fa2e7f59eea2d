package spool

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// Files keeps whole files on local disk, in one temporary file unlinked the moment it
// is created (nothing is left behind on any exit path), so that they can be written at
// local disk speed now and stored elsewhere later. A backup copies into it what it
// copies while the server's locks are held, and stores it at its end once they are
// released: the locks never wait on a slow end.
//
// Files are written at any offset, by several goroutines at once (one file may be
// written by several too); each write is kept as it came and replayed in the same
// order, so an end that takes writes only in order gets them in order.
type Files struct {
	dir string
	max int64

	mu       sync.Mutex
	f        *os.File
	end      int64 // bytes written into f so far
	reserved int64 // bytes reserved by Create
	list     []*File
}

// File is one file kept in Files.
type File struct {
	fs      *Files
	name    string
	writes  []extent
	size    int64
	written int64
	closed  bool
}

// extent is one write: n bytes for offset off of the file, kept at pos in the spool.
type extent struct {
	off, pos int64
	n        int
}

// WriterAt is where a kept file is stored (a backup end's file).
type WriterAt interface {
	WriteAt(p []byte, off int64) error
}

// NewFiles returns an empty Files whose file goes into dir ("" is os.TempDir()) and
// that reserves at most max bytes (0: no bound).
func NewFiles(dir string, max int64) *Files {
	return &Files{dir: dir, max: max}
}

// Create starts a file expected to take size bytes. ok is false, and nothing is kept,
// when that would reserve more than the bound: the caller writes that file elsewhere.
// A file may grow past what it reserved, as long as the spool stays within its bound.
func (fs *Files) Create(name string, size int64) (f *File, ok bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	size = max(size, 0)
	if fs.max > 0 && fs.reserved+size > fs.max {
		return nil, false
	}
	fs.reserved += size
	f = &File{fs: fs, name: name}
	fs.list = append(fs.list, f)
	return f, true
}

// Name is the file's name as Create was given it.
func (f *File) Name() string { return f.name }

// Size is the size Close gave the file.
func (f *File) Size() int64 { return f.size }

// WriteAt keeps a copy of p for offset off.
func (f *File) WriteAt(p []byte, off int64) error {
	fs := f.fs
	fs.mu.Lock()
	if f.closed {
		fs.mu.Unlock()
		return fmt.Errorf("spool: write to %s after it was closed (internal error)", f.name)
	}
	if fs.max > 0 && fs.end+int64(len(p)) > fs.max {
		fs.mu.Unlock()
		return fmt.Errorf("spool: %s grew past what was reserved, and the spool in %s past its bound of %d bytes: raise the bound or give the spool more room", f.name, dirName(fs.dir), fs.max)
	}
	if err := fs.open(); err != nil {
		fs.mu.Unlock()
		return err
	}
	pos := fs.end
	fs.end += int64(len(p))
	f.writes = append(f.writes, extent{off: off, pos: pos, n: len(p)})
	f.written += int64(len(p))
	file := fs.f
	fs.mu.Unlock()
	if _, err := file.WriteAt(p, pos); err != nil {
		return fmt.Errorf("write the spool file in %s: %w", dirName(fs.dir), err)
	}
	return nil
}

// Close ends the file at size.
func (f *File) Close(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.closed, f.size = true, size
	return nil
}

// open creates the spool file on the first write (fs.mu held).
func (fs *Files) open() error {
	if fs.f != nil {
		return nil
	}
	f, err := tempFile(fs.dir)
	fs.f = f
	return err
}

// Held is the bytes written into the spool so far.
func (fs *Files) Held() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.end
}

// List returns the files in the order they were created.
func (fs *Files) List() []*File {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]*File(nil), fs.list...)
}

// ErrOpen is what CopyTo returns for a file that was never closed.
var ErrOpen = errors.New("file still open")

// CopyTo replays the file's writes into w, in the order they were made, through buf
// (a write larger than buf is replayed in pieces).
func (f *File) CopyTo(w WriterAt, buf []byte) error {
	fs := f.fs
	fs.mu.Lock()
	closed, writes, file := f.closed, f.writes, fs.f
	fs.mu.Unlock()
	if !closed {
		return fmt.Errorf("spool: %s: %w (internal error)", f.name, ErrOpen)
	}
	for _, e := range writes {
		for done := 0; done < e.n; {
			n := min(len(buf), e.n-done)
			if _, err := file.ReadAt(buf[:n], e.pos+int64(done)); err != nil {
				return fmt.Errorf("read the spool file in %s: %w", dirName(fs.dir), err)
			}
			if err := w.WriteAt(buf[:n], e.off+int64(done)); err != nil {
				return err
			}
			done += n
		}
	}
	return nil
}

// Release frees the spool file; the Files is empty afterwards.
func (fs *Files) Release() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.f != nil {
		fs.f.Close()
		fs.f = nil
	}
	fs.list, fs.end, fs.reserved = nil, 0, 0
}

// tempFile creates a file in dir and unlinks it at once: the kernel frees it however
// the process ends.
func tempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "ferry-spool-*")
	if err != nil {
		return nil, fmt.Errorf("create the spool file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("unlink the spool file: %w", err)
	}
	return f, nil
}

func dirName(dir string) string {
	if dir == "" {
		return os.TempDir()
	}
	return dir
}
