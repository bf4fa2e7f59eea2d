package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Cluster header magics and the page-list terminator.
const (
	magicMore uint32 = 0x78747261 // "xtra": a full cluster, more follow
	magicLast uint32 = 0x58545241 // "XTRA": the last cluster
	endOfList uint32 = 0xFFFFFFFF
)

// ClusterPages returns how many data pages a full cluster holds for pageSize: one
// page of the cluster's pageSize/4 is the header.
func ClusterPages(pageSize int) int { return pageSize/4 - 1 }

// errClosed is returned by a Writer used after Close.
var errClosed = errors.New("delta: writer is closed")

// Writer writes a .delta file sequentially. It buffers at most one cluster: a full
// cluster is written (as "xtra") only when a further page arrives, and Close writes
// what is buffered as the last ("XTRA") cluster.
type Writer struct {
	w        io.Writer
	pageSize int
	nos      []uint32 // page numbers of the buffered cluster
	buf      []byte   // page images of the buffered cluster
	hdr      []byte
	prev     uint32
	pages    int
	written  int64
	closed   bool
	err      error // sticky: the first write error
}

// NewWriter returns a Writer of pages of pageSize bytes (the delta's physical page
// size, Meta.Physical) to w. An invalid pageSize makes Add and Close fail.
func NewWriter(w io.Writer, pageSize int) *Writer {
	return &Writer{w: w, pageSize: pageSize}
}

// Add appends a copy of page as page pageNo. Page numbers must be strictly increasing
// and below 0xFFFFFFFF; page must be exactly pageSize bytes.
func (w *Writer) Add(pageNo uint32, page []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	switch {
	case len(page) != w.pageSize:
		return fmt.Errorf("delta: page %d is %d bytes, want %d", pageNo, len(page), w.pageSize)
	case pageNo == endOfList:
		return fmt.Errorf("delta: page number %#x is reserved", pageNo)
	case w.pages > 0 && pageNo <= w.prev:
		return fmt.Errorf("delta: page %d added after page %d: page numbers must increase", pageNo, w.prev)
	}
	if len(w.nos) == ClusterPages(w.pageSize) {
		if err := w.flush(magicMore); err != nil {
			return err
		}
	}
	w.nos = append(w.nos, pageNo)
	w.buf = append(w.buf, page...)
	w.prev = pageNo
	w.pages++
	return nil
}

// Close writes the buffered pages as the last cluster ("XTRA"; a delta without pages
// is one header page). It does not close the underlying writer.
func (w *Writer) Close() error {
	if err := w.usable(); err != nil {
		return err
	}
	w.closed = true
	return w.flush(magicLast)
}

// Pages returns the number of pages added.
func (w *Writer) Pages() int { return w.pages }

// Written returns the number of bytes written to the underlying writer so far.
func (w *Writer) Written() int64 { return w.written }

func (w *Writer) usable() error {
	switch {
	case w.err != nil:
		return w.err
	case w.closed:
		return errClosed
	}
	return checkPageSize(w.pageSize)
}

// flush writes the buffered cluster with magic and empties the buffer.
func (w *Writer) flush(magic uint32) error {
	if w.hdr == nil {
		w.hdr = make([]byte, w.pageSize)
	}
	clear(w.hdr)
	binary.BigEndian.PutUint32(w.hdr, magic)
	for i, no := range w.nos {
		binary.BigEndian.PutUint32(w.hdr[4+4*i:], no)
	}
	if len(w.nos) < ClusterPages(w.pageSize) {
		binary.BigEndian.PutUint32(w.hdr[4+4*len(w.nos):], endOfList)
	}
	for _, b := range [][]byte{w.hdr, w.buf} {
		n, err := w.w.Write(b)
		w.written += int64(n)
		if err != nil {
			w.err = fmt.Errorf("delta: write: %w", err)
			return w.err
		}
	}
	w.nos, w.buf = w.nos[:0], w.buf[:0]
	return nil
}
