package repo

import (
	"io"
	"sync"

	"github.com/ferry-backup/ferry/internal/checksum"
)

// chunkSize is the unit in which encoded bytes are held: small enough that a small
// file does not pin much, large enough to keep the chunk lists short.
const chunkSize = 256 << 10

// chunkPool recycles chunks, so steady uploads reuse warm memory instead of leaving
// the garbage collector to return it. The budget bounds how many are in use.
type chunkPool struct {
	mu   sync.Mutex
	free [][]byte
}

func (p *chunkPool) get() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := len(p.free); k > 0 {
		c := p.free[k-1]
		p.free = p.free[:k-1]
		return c[:0]
	}
	return make([]byte, 0, chunkSize)
}

func (p *chunkPool) put(cs [][]byte) {
	p.mu.Lock()
	p.free = append(p.free, cs...)
	p.mu.Unlock()
}

// buffer holds encoded bytes (one part, or a pack of small blobs) until they are
// uploaded, with their CRC-32C. It is an io.Writer for the encoder and an io.ReaderAt
// for the upload, which may read it again on a retry.
type buffer struct {
	pool   *chunkPool
	chunks [][]byte
	n      int64
	crc    uint32
}

func (b *buffer) Write(p []byte) (int, error) {
	b.crc = checksum.Update(b.crc, p)
	n := len(p)
	for len(p) > 0 {
		k := len(b.chunks)
		if k == 0 || len(b.chunks[k-1]) == chunkSize {
			b.chunks = append(b.chunks, b.pool.get())
			k++
		}
		c := b.chunks[k-1]
		m := min(len(p), chunkSize-len(c))
		b.chunks[k-1] = append(c, p[:m]...)
		p = p[m:]
	}
	b.n += int64(n)
	return n, nil
}

// ReadAt implements io.ReaderAt.
func (b *buffer) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for len(p) > 0 && off < b.n {
		c := b.chunks[off/chunkSize]
		k := copy(p, c[off%chunkSize:])
		n += k
		p = p[k:]
		off += int64(k)
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

// appendTo copies the buffer's bytes to w.
func (b *buffer) appendTo(w io.Writer) {
	for _, c := range b.chunks {
		w.Write(c)
	}
}

// release returns the chunks to the pool.
func (b *buffer) release() {
	b.pool.put(b.chunks)
	b.chunks, b.n, b.crc = nil, 0, 0
}
