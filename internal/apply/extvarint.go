package apply

// extVarintLen is the length of the redo varint whose first byte is c, counted the
// way the server counts it when it checks a record (mlog_decode_varint_length):
// one byte plus one per leading 1 bit, so 0xF8 and above give 6 to 9.
func extVarintLen(c byte) int {
	n := 1
	for c&0x80 != 0 {
		n++
		c <<= 1
	}
	return n
}

// extVarint decodes a varint of at most 3 bytes (the longest an EXTENDED record
// field may use) at the start of b. It returns the value and the length of the
// encoding per extVarintLen; the value is meaningful only if that length is at
// most 3 and at most len(b).
// TODO(lead): share one decoder with internal/redo/varint.go.
func extVarint(b []byte) (v, n int) {
	if len(b) == 0 {
		return 0, 1
	}
	n = extVarintLen(b[0])
	if n > len(b) {
		return 0, n
	}
	switch n {
	case 1:
		return int(b[0]), 1
	case 2:
		return (int(b[0]&0x3F)<<8 | int(b[1])) + 0x80, 2
	case 3:
		return (int(b[0]&0x1F)<<16 | int(b[1])<<8 | int(b[2])) + 0x4080, 3
	}
	return 0, n
}

// extReader walks the fields of an EXTENDED payload with the server's length rules:
// each varint has a maximum length and must either leave bytes after it or may end
// the record.
type extReader struct {
	rest []byte
	err  string
}

// next decodes one varint of at most maxLen bytes. With mayEnd false, at least one
// byte must follow it.
func (r *extReader) next(name string, maxLen int, mayEnd bool) int {
	if r.err != "" {
		return 0
	}
	v, n := extVarint(r.rest)
	if n > maxLen || n > len(r.rest) || (!mayEnd && n == len(r.rest)) {
		r.err = "bad length of field " + name
		return 0
	}
	r.rest = r.rest[n:]
	return v
}
