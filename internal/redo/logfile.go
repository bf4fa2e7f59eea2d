package redo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// logFile is an open ib_logfile0 with its header and geometry.
type logFile struct {
	f      *os.File
	path   string
	direct bool // opened with O_DIRECT
	size   int64
	dev    uint64
	ino    uint64
	hdr    Header
	ring   ring
	head   []byte // the first StartOffset bytes as read at open
}

// openLog opens path (with O_DIRECT where the file system allows it), reads
// and validates its header and computes the ring geometry.
func openLog(path string) (*logFile, error) {
	l := &logFile{path: path, direct: true}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		l.direct = false
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("open redo log: %w", err)
	}
	l.f = f
	if err := l.load(); err != nil {
		f.Close()
		return nil, fmt.Errorf("redo log %s: %w", path, err)
	}
	return l, nil
}

// load reads the identity, size, header and geometry of the open file.
func (l *logFile) load() error {
	st, err := l.f.Stat()
	if err != nil {
		return err
	}
	l.size = st.Size()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		l.dev, l.ino = uint64(sys.Dev), sys.Ino
	}
	if l.size%align != 0 {
		l.direct = false // unaligned tail: O_DIRECT could not read it
	}
	if l.size <= StartOffset+align {
		return fmt.Errorf("file size %d is too small", l.size)
	}
	l.head = alignedBuf(StartOffset)
	if err := l.readAt(l.head, 0); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	if l.hdr, err = ParseHeader(l.head); err != nil {
		return err
	}
	l.ring = ring{first: l.hdr.FirstLSN, capacity: uint64(l.size - StartOffset)}
	return nil
}

// readAt fills b from offset off. With O_DIRECT, b, off and len(b) must be
// aligned; if the kernel still refuses, the file is reopened buffered.
func (l *logFile) readAt(b []byte, off int64) error {
	_, err := l.f.ReadAt(b, off)
	if errors.Is(err, syscall.EINVAL) && l.direct {
		if err = l.reopenBuffered(); err == nil {
			_, err = l.f.ReadAt(b, off)
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read %s at %d: %w", l.path, off, err)
	}
	return nil
}

// reopenBuffered replaces the O_DIRECT descriptor with a buffered one of the
// same file (by /proc/self/fd, so a concurrent rename does not matter).
func (l *logFile) reopenBuffered() error {
	f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", l.f.Fd()))
	if err != nil {
		return fmt.Errorf("reopen without O_DIRECT: %w", err)
	}
	l.f.Close()
	l.f, l.direct = f, false
	return nil
}

// readLSN reads the n bytes of LSNs [lsn, lsn+n) into buf, wrapping at the
// end of the file, and returns them as a sub-slice of buf. buf must be
// aligned and at least n+2*align long; n must not exceed the capacity.
func (l *logFile) readLSN(buf []byte, lsn uint64, n int) ([]byte, error) {
	o := l.ring.offset(lsn)
	start := roundDown(o)
	slack := int(o - start)
	first := min(o+int64(n), l.size)
	if err := l.readAt(buf[:roundUp(first)-start], start); err != nil {
		return nil, err
	}
	if rest := o + int64(n) - l.size; rest > 0 {
		at := int(l.size - start)
		if err := l.readAt(buf[at:at+int(roundUp(rest))], StartOffset); err != nil {
			return nil, err
		}
	}
	return buf[slack : slack+n], nil
}

// replaced reports whether path now names a different file (or a file of a
// different size) than the one open, e.g. after an online log resize.
func (l *logFile) replaced() bool {
	st, err := os.Stat(l.path)
	if err != nil {
		return false // mid-rename or gone: decide on the next poll
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return st.Size() != l.size
	}
	return uint64(sys.Dev) != l.dev || sys.Ino != l.ino || st.Size() != l.size
}

// close closes the file.
func (l *logFile) close() error { return l.f.Close() }
