package xbstream

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
)

// Reader reads chunks from a stream and verifies each payload's CRC-32.
type Reader struct {
	r   *bufio.Reader
	pos int64
	buf []byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 1<<20)} }

// Next returns the next chunk, or io.EOF at a clean end of stream (between chunks).
// The Payload slice is only valid until the following call. A truncated or damaged
// stream gives an error wrapping ErrCorrupt that says where.
func (x *Reader) Next() (*Chunk, error) {
	for {
		c, err := x.next()
		if c != nil || err != nil {
			return c, err
		}
	}
}

// next reads one chunk; nil without an error for an ignorable chunk of an unknown
// type (skipped in a loop, so a stream of them cannot grow the stack).
func (x *Reader) next() (*Chunk, error) {
	start := x.pos
	head, err := x.read(len(Magic) + 2 + 4)
	if err == io.EOF && x.pos == start {
		return nil, io.EOF
	}
	if err != nil {
		return nil, truncated(start, err)
	}
	if string(head[:len(Magic)]) != Magic {
		return nil, corrupt(start, "no chunk magic (not an xbstream, or damaged)")
	}
	c := &Chunk{Flags: head[8], Type: head[9]}
	n := binary.LittleEndian.Uint32(head[10:])
	if n == 0 || n > MaxPathLen {
		return nil, corrupt(start, "path length %d", n)
	}
	path, err := x.read(int(n))
	if err != nil {
		return nil, truncated(start, err)
	}
	c.Path = string(path)
	switch c.Type {
	case TypeEOF:
		return c, nil
	case TypePayload:
		return c, x.payload(c, start)
	}
	if c.Flags&FlagIgnorable != 0 {
		return nil, nil
	}
	return nil, corrupt(start, "unknown chunk type %q for %s", c.Type, c.Path)
}

func (x *Reader) payload(c *Chunk, start int64) error {
	h, err := x.read(20)
	if err != nil {
		return truncated(start, err)
	}
	size := binary.LittleEndian.Uint64(h)
	c.Offset = binary.LittleEndian.Uint64(h[8:])
	c.CRC = binary.LittleEndian.Uint32(h[16:])
	if size > MaxPayload {
		return corrupt(start, "payload length %d for %s", size, c.Path)
	}
	if cap(x.buf) < int(size) {
		x.buf = make([]byte, size)
	}
	c.Payload = x.buf[:size]
	if _, err := io.ReadFull(x.r, c.Payload); err != nil {
		return truncated(start, err)
	}
	x.pos += int64(size)
	if got := crc32.ChecksumIEEE(c.Payload); got != c.CRC {
		return corrupt(start, "checksum mismatch in %s at offset %d (CRC-32 %08x, chunk says %08x)", c.Path, c.Offset, got, c.CRC)
	}
	return nil
}

// read returns the next n bytes (valid until the next read).
func (x *Reader) read(n int) ([]byte, error) {
	b, err := x.r.Peek(n)
	if len(b) < n {
		if err == nil || errors.Is(err, bufio.ErrBufferFull) {
			err = io.ErrUnexpectedEOF
		}
		if len(b) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		return nil, io.ErrUnexpectedEOF
	}
	x.r.Discard(n)
	x.pos += int64(n)
	return b, nil
}

func truncated(start int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt(start, "stream ends inside a chunk (truncated: the writer was interrupted or the connection dropped)")
	}
	return err
}
