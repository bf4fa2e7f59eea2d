package directio

import "unsafe"

// Align is the alignment of buffers, offsets and lengths of direct reads. 4096 covers
// the logical block size of every common device and file system.
const Align = 4096

// AlignedBuffer returns a buffer of n bytes rounded up to a multiple of Align whose
// first byte is Align-aligned in memory. The Go heap does not move objects, so the
// alignment holds for the buffer's lifetime.
func AlignedBuffer(n int) []byte {
	n = roundUp(n)
	b := make([]byte, n+Align)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % Align); r != 0 {
		skip = Align - r
	}
	return b[skip : skip+n : skip+n]
}

func roundUp(n int) int { return (max(n, 0) + Align - 1) &^ (Align - 1) }

// aligned reports whether buf starts at an Align-aligned address and has an aligned
// length (an empty buffer is aligned).
func aligned(buf []byte) bool {
	if len(buf) == 0 {
		return true
	}
	return uintptr(unsafe.Pointer(&buf[0]))%Align == 0 && len(buf)%Align == 0
}
