// Package checksum computes the CRC-32C (Castagnoli) checksums ferry records for every
// stored byte, including combining the checksums of file segments copied in parallel.
package checksum

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// Table is the hardware-accelerated Castagnoli table.
var Table = crc32.MakeTable(crc32.Castagnoli)

// ErrMismatch is wrapped by the errors of data whose checksum is not the one recorded
// for it: a damaged backup or stream.
var ErrMismatch = errors.New("checksum mismatch")

// Mismatch marks err, which says what failed its check, with ErrMismatch; its message
// stays as it is.
func Mismatch(err error) error { return mismatch{err} }

type mismatch struct{ error }

func (m mismatch) Unwrap() []error { return []error{m.error, ErrMismatch} }

// Update extends crc with p.
func Update(crc uint32, p []byte) uint32 { return crc32.Update(crc, Table, p) }

// Sum returns the CRC-32C of p.
func Sum(p []byte) uint32 { return crc32.Checksum(p, Table) }

// Hex formats a checksum as the manifest stores it.
func Hex(c uint32) string { return fmt.Sprintf("%08x", c) }

// Combine returns the CRC-32C of A||B given crcA = CRC(A), crcB = CRC(B) and len(B).
// It multiplies crcA by x^(8·lenB) in GF(2)[x] modulo the reflected Castagnoli
// polynomial, the same algebra as zlib's crc32_combine.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return multModP(xPow8n(lenB), crcA) ^ crcB
}

const poly = 0x82f63b78 // reflected Castagnoli polynomial

// multModP multiplies a and b modulo the polynomial (reflected bit order).
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) modulo the polynomial.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	x := uint32(1) << 23 // x^8 in reflected order
	for n > 0 {
		if n&1 != 0 {
			p = multModP(x, p)
		}
		x = multModP(x, x)
		n >>= 1
	}
	return p
}

// Zeros is the CRC-32C of n zero bytes (the holes of a sparse copy), in O(log² n).
func Zeros(n int64) uint32 {
	var crc uint32
	piece, plen := Sum([]byte{0}), int64(1)
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			crc = Combine(crc, piece, plen)
		}
		piece = Combine(piece, piece, plen)
		plen *= 2
	}
	return crc
}

// Replace returns the CRC-32C of a size-byte message whose CRC-32C is crc, after the
// n bytes at off (off+n <= size), whose CRC-32C was old, were replaced by n bytes whose
// CRC-32C is new. CRC-32C is affine: for messages of one length,
// CRC(x⊕y⊕z) = CRC(x)⊕CRC(y)⊕CRC(z), so the message with its range swapped is the
// old one ⊕ (zeros with the old range) ⊕ (zeros with the new range). No byte outside
// the range is read again.
func Replace(crc uint32, size, off, n int64, old, new uint32) uint32 {
	at := func(c uint32) uint32 {
		rest := size - off - n
		return Combine(Combine(Zeros(off), c, n), Zeros(rest), rest)
	}
	return crc ^ at(old) ^ at(new)
}

// Extend returns the CRC-32C of a message whose CRC-32C is crc after n zero bytes are
// appended.
func Extend(crc uint32, n int64) uint32 { return Combine(crc, Zeros(n), n) }
