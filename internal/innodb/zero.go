package innodb

import "encoding/binary"

// IsZero reports whether every byte of b is zero. It reads 64 bytes per step, so it is
// cheap enough to run on every page (all-zero pages are valid: allocated, never written).
func IsZero(b []byte) bool {
	for len(b) >= 64 {
		x := binary.LittleEndian.Uint64(b) | binary.LittleEndian.Uint64(b[8:]) |
			binary.LittleEndian.Uint64(b[16:]) | binary.LittleEndian.Uint64(b[24:]) |
			binary.LittleEndian.Uint64(b[32:]) | binary.LittleEndian.Uint64(b[40:]) |
			binary.LittleEndian.Uint64(b[48:]) | binary.LittleEndian.Uint64(b[56:])
		if x != 0 {
			return false
		}
		b = b[64:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
