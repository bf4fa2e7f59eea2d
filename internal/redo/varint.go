package redo

// Base values of the multi-byte varint forms used by InnoDB redo records
// (mlog_decode_varint): each longer form starts where the shorter one ends.
const (
	varint2Base = 0x80
	varint3Base = 0x4080
	varint4Base = 0x204080
	varint5Base = 0x10204080
)

// varintLen returns the encoded length of the varint whose first byte is c,
// or 0 if c cannot start a varint.
func varintLen(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c < 0xC0:
		return 2
	case c < 0xE0:
		return 3
	case c < 0xF0:
		return 4
	case c == 0xF0:
		return 5
	}
	return 0
}

// decodeVarint decodes the varint at the start of b. It returns the value and
// its encoded length; n == 0 means the first byte is invalid, n > len(b)
// means b is too short (the value is then 0).
func decodeVarint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 1
	}
	n = varintLen(b[0])
	if n == 0 || n > len(b) {
		return 0, n
	}
	switch n {
	case 1:
		return uint64(b[0]), 1
	case 2:
		return (uint64(b[0]&0x3F)<<8 | uint64(b[1])) + varint2Base, 2
	case 3:
		return (uint64(b[0]&0x1F)<<16 | uint64(b[1])<<8 | uint64(b[2])) + varint3Base, 3
	case 4:
		return (uint64(b[0]&0x0F)<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])) + varint4Base, 4
	}
	return (uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4])) + varint5Base, 5
}
