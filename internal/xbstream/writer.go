package xbstream

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
)

// Writer writes chunks to an io.Writer; it is safe for concurrent use, each chunk being
// written whole, so several files can be streamed at once.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	hdr []byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WritePayload writes one payload chunk: p is the content of path at offset.
func (x *Writer) WritePayload(path string, offset uint64, p []byte) error {
	return x.write(TypePayload, path, offset, p)
}

// WriteEOF marks path complete.
func (x *Writer) WriteEOF(path string) error { return x.write(TypeEOF, path, 0, nil) }

func (x *Writer) write(typ byte, path string, offset uint64, p []byte) error {
	if len(path) == 0 || len(path) > MaxPathLen {
		return fmt.Errorf("xbstream: path %q: length must be 1..%d", path, MaxPathLen)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	h := append(x.hdr[:0], Magic...)
	h = append(h, 0, typ)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(path)))
	h = append(h, path...)
	if typ == TypePayload {
		h = binary.LittleEndian.AppendUint64(h, uint64(len(p)))
		h = binary.LittleEndian.AppendUint64(h, offset)
		h = binary.LittleEndian.AppendUint32(h, crc32.ChecksumIEEE(p))
	}
	x.hdr = h
	if _, err := x.w.Write(h); err != nil {
		return fmt.Errorf("xbstream: write chunk header for %s: %w", path, err)
	}
	if len(p) > 0 {
		if _, err := x.w.Write(p); err != nil {
			return fmt.Errorf("xbstream: write %s at %d: %w", path, offset, err)
		}
	}
	return nil
}
