package apply

import "fmt"

// extPage is the frame an EXTENDED record is applied to. Every read and write is
// bounded by the frame: an access outside it (which the server would make only on
// a page it has already half-trusted, with undefined results) marks the page bad
// instead of panicking. Writes are journaled, so that a check failing after the
// first write (a directory split or balance that would walk off the record list)
// can put the frame back exactly as it was.
type extPage struct {
	f      []byte
	size   int
	bad    string // first out-of-frame access, if any
	noUndo bool   // no journal: the caller drops the frame if the record is refused

	offs []int32 // journal: offset of each saved span
	lens []int32 // journal: length of each saved span
	old  []byte  // journal: the saved bytes, span after span

	// Initial journal storage: enough for an insert or delete of a short record
	// without allocating.
	offBuf, lenBuf [32]int32
	oldBuf         [512]byte
}

// newExtPage returns the journaled view of frame.
func newExtPage(frame []byte) *extPage {
	p := &extPage{f: frame, size: len(frame)}
	p.offs, p.lens, p.old = p.offBuf[:0], p.lenBuf[:0], p.oldBuf[:0]
	return p
}

// extView returns the view of frame for the engine: without the journal when undo is
// false (the engine drops a page whose record is refused, so nothing needs undoing).
func extView(frame []byte, undo bool) *extPage {
	if undo {
		return newExtPage(frame)
	}
	return &extPage{f: frame, size: len(frame), noUndo: true}
}

// in reports whether [off, off+n) lies inside the frame; if not it marks the page bad.
func (p *extPage) in(off, n int) bool {
	if off >= 0 && n >= 0 && off <= p.size-n {
		return true
	}
	p.outside(off, n)
	return false
}

// outside marks the page bad for an access to [off, off+n), apart from in so that in
// and the readers built on it are inlined.
func (p *extPage) outside(off, n int) {
	if p.bad == "" {
		p.bad = fmt.Sprintf("access to bytes [%d, %d) outside the %d-byte page", off, off+n, p.size)
	}
}

// fault marks the page bad for a reason found while writing.
func (p *extPage) fault(reason string) {
	if p.bad == "" {
		p.bad = reason
	}
}

// u8 reads one byte (0 when out of the frame).
func (p *extPage) u8(off int) int {
	if !p.in(off, 1) {
		return 0
	}
	return int(p.f[off])
}

// u16 reads a big-endian 16-bit value (0 when out of the frame).
func (p *extPage) u16(off int) int {
	if !p.in(off, 2) {
		return 0
	}
	return int(p.f[off])<<8 | int(p.f[off+1])
}

// save journals the current bytes of [off, off+n) and reports whether the span is
// inside the frame.
func (p *extPage) save(off, n int) bool {
	if !p.in(off, n) {
		return false
	}
	if n == 0 || p.noUndo {
		return true
	}
	p.offs = append(p.offs, int32(off))
	p.lens = append(p.lens, int32(n))
	p.old = append(p.old, p.f[off:off+n]...)
	return true
}

// set8 writes one byte.
func (p *extPage) set8(off, v int) {
	if p.save(off, 1) {
		p.f[off] = byte(v)
	}
}

// set16 writes the low 16 bits of v big-endian, as mach_write_to_2 does.
func (p *extPage) set16(off, v int) {
	if p.save(off, 2) {
		p.f[off] = byte(v >> 8)
		p.f[off+1] = byte(v)
	}
}

// write copies b to off.
func (p *extPage) write(off int, b []byte) {
	if p.save(off, len(b)) {
		copy(p.f[off:], b)
	}
}

// move copies n bytes inside the frame from src to dst (overlap allowed).
func (p *extPage) move(dst, src, n int) {
	if p.in(src, n) && p.save(dst, n) {
		copy(p.f[dst:dst+n], p.f[src:src+n])
	}
}

// fill sets n bytes at off to v.
func (p *extPage) fill(off, n int, v byte) {
	if p.save(off, n) {
		b := p.f[off : off+n]
		for i := range b {
			b[i] = v
		}
	}
}

// setOwned sets the n_owned nibble of the record header byte at off, keeping the
// info bits.
func (p *extPage) setOwned(off, n int) {
	p.set8(off, p.u8(off)&0xF0|n)
}

// rollback restores every journaled span, newest first.
func (p *extPage) rollback() {
	end := len(p.old)
	for i := len(p.offs) - 1; i >= 0; i-- {
		off, n := int(p.offs[i]), int(p.lens[i])
		copy(p.f[off:off+n], p.old[end-n:end])
		end -= n
	}
	p.offs, p.lens, p.old = p.offs[:0], p.lens[:0], p.old[:0]
}

// done ends the application: if any access fell outside the frame the writes are
// undone and the access is reported.
func (p *extPage) done() error {
	if p.bad != "" {
		p.rollback()
		return fmt.Errorf("page corrupted: %s", p.bad)
	}
	return nil
}

// corrupt undoes every write and returns the reason the server would give up on
// the page.
func (p *extPage) corrupt(format string, args ...any) error {
	p.rollback()
	return fmt.Errorf("page corrupted: "+format, args...)
}
