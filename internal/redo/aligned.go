package redo

import "unsafe"

// align is the alignment of O_DIRECT reads: offsets, lengths and buffer
// addresses are multiples of it (4 KiB covers 512- and 4096-byte sectors).
const align = 4096

// alignedBuf returns a zeroed n-byte slice whose first byte is align-aligned.
func alignedBuf(n int) []byte {
	b := make([]byte, n+align)
	skip := (align - int(uintptr(unsafe.Pointer(&b[0]))&(align-1))) & (align - 1)
	return b[skip : skip+n : skip+n]
}

// roundDown rounds x down to a multiple of align.
func roundDown(x int64) int64 { return x &^ (align - 1) }

// roundUp rounds x up to a multiple of align.
func roundUp(x int64) int64 { return (x + align - 1) &^ (align - 1) }
