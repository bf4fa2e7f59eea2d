// Package spool keeps on local disk what a backup must not wait on its end for. Spool
// is an in-order byte queue whose writer never waits for its reader: bytes are kept in
// memory up to a bound, then in a temporary file, up to a total bound. The redo copy
// writes into one at local disk speed while the backup's end (a slow link, a far S3
// bucket) drains it as fast as it can. Files keeps whole files for later: what a
// backup copies under the server's locks.
package spool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// ErrFull means the spool would hold more than its bound.
var ErrFull = errors.New("spool full")

// Options bound a Spool.
type Options struct {
	Dir    string // where the file tier goes; "" is os.TempDir()
	Memory int64  // bytes kept in memory before the file tier is used
	Max    int64  // most bytes held at once (memory and file); 0 is unbounded
}

// Spool is the queue. Write and Close are called by one writer, Drain by one reader.
// The file tier is unlinked as soon as it is created, so the kernel frees it however
// the process ends, SIGKILL included: nothing is ever left behind.
type Spool struct {
	opts Options
	mu   sync.Mutex
	cond *sync.Cond
	mem  [][]byte // in-memory bytes, oldest first
	memN int64
	file *os.File // the file tier, nil until needed
	rOff int64    // file offsets: next byte to drain, next byte to write
	wOff int64
	done bool  // the writer closed
	err  error // Abort's cause
	held int64
	peak int64
}

// New returns an empty spool.
func New(o Options) *Spool {
	s := &Spool{opts: o}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Write queues a copy of p; it never waits for the reader. It fails with ErrFull
// (wrapped with what to do) if the spool would exceed its bound.
func (s *Spool) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	if s.opts.Max > 0 && s.held+int64(len(p)) > s.opts.Max {
		return 0, fmt.Errorf("%w: it would hold more than %d MiB in %s", ErrFull, s.opts.Max>>20, s.dirName())
	}
	if s.wOff > s.rOff || s.memN+int64(len(p)) > s.opts.Memory {
		if err := s.toFile(p); err != nil {
			return 0, err
		}
	} else {
		s.mem = append(s.mem, append([]byte(nil), p...))
		s.memN += int64(len(p))
	}
	s.held += int64(len(p))
	s.peak = max(s.peak, s.held)
	s.cond.Signal()
	return len(p), nil
}

// toFile appends p to the file tier, creating it (unlinked) if needed. Order is kept:
// once bytes are in the file, later bytes follow them there until it is drained.
func (s *Spool) toFile(p []byte) error {
	if s.file == nil {
		f, err := tempFile(s.opts.Dir)
		if err != nil {
			return err
		}
		s.file = f
	}
	if _, err := s.file.WriteAt(p, s.wOff); err != nil {
		return fmt.Errorf("write the spool file in %s: %w", s.dirName(), err)
	}
	s.wOff += int64(len(p))
	return nil
}

func (s *Spool) dirName() string { return dirName(s.opts.Dir) }

// Close ends the writer's side: Drain returns once the rest is drained.
func (s *Spool) Close() error {
	s.mu.Lock()
	s.done = true
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

// Abort stops both sides with err and releases the file tier.
func (s *Spool) Abort(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// Release closes the file tier; call it once the reader is done.
func (s *Spool) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	s.mem, s.memN = nil, 0
}

// Held is the bytes queued and not drained yet.
func (s *Spool) Held() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Peak is the most bytes the spool held at once.
func (s *Spool) Peak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Drain writes the queued bytes to w in order until the writer closed and everything
// was written, or w or Abort fails it. buf is the size of each read from the file
// tier.
func (s *Spool) Drain(w io.Writer, buf int) error {
	b := make([]byte, buf)
	for {
		p, fromFile, err := s.next(b)
		if err != nil || p == nil {
			return err
		}
		if _, err := w.Write(p); err != nil {
			s.Abort(err)
			return err
		}
		s.consumed(int64(len(p)), fromFile)
	}
}

// DrainN writes exactly the n oldest queued bytes to w, leaving the rest queued for a
// later Drain or DrainN. It fails without writing anything if fewer than n bytes are
// held, and, unlike Drain, a failing w does not abort the spool.
func (s *Spool) DrainN(w io.Writer, n int64, buf int) error {
	if h := s.Held(); h < n {
		return fmt.Errorf("the spool holds %d bytes, fewer than the %d asked for", h, n)
	}
	b := make([]byte, buf)
	for n > 0 {
		p, fromFile, err := s.next(b)
		if err != nil {
			return err
		}
		if p == nil {
			return io.ErrUnexpectedEOF
		}
		p = p[:min(int64(len(p)), n)]
		if _, err := w.Write(p); err != nil {
			return err
		}
		s.consumed(int64(len(p)), fromFile)
		n -= int64(len(p))
	}
	return nil
}

// next waits for bytes and returns the oldest ones (a memory chunk, or a read from the
// file tier into b); nil when the writer closed and all was drained. The file is read
// without the lock: the writer only appends beyond the range read, and only the
// reader truncates.
func (s *Spool) next(b []byte) ([]byte, bool, error) {
	s.mu.Lock()
	for s.err == nil && len(s.mem) == 0 && s.rOff == s.wOff && !s.done {
		s.cond.Wait()
	}
	switch {
	case s.err != nil:
		s.mu.Unlock()
		return nil, false, s.err
	case len(s.mem) > 0:
		p := s.mem[0]
		s.mu.Unlock()
		return p, false, nil
	case s.rOff < s.wOff:
		f, off, n := s.file, s.rOff, min(int64(len(b)), s.wOff-s.rOff)
		s.mu.Unlock()
		if _, err := f.ReadAt(b[:n], off); err != nil {
			return nil, false, fmt.Errorf("read the spool file: %w", err)
		}
		return b[:n], true, nil
	}
	s.mu.Unlock()
	return nil, false, nil // done and empty
}

// consumed drops n drained bytes; a drained file tier is emptied for reuse.
func (s *Spool) consumed(n int64, fromFile bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held -= n
	if !fromFile {
		if n < int64(len(s.mem[0])) { // DrainN took the start of a chunk
			s.mem[0] = s.mem[0][n:]
		} else {
			s.mem = s.mem[1:]
		}
		s.memN -= n
		return
	}
	s.rOff += n
	if s.rOff == s.wOff {
		s.rOff, s.wOff = 0, 0
		s.file.Truncate(0)
	}
}
