package apply

import "github.com/ferry-backup/ferry/internal/redo"

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
	v, n := redo.Varint(r.rest)
	if n == 0 || n > maxLen || (!mayEnd && n == len(r.rest)) {
		r.err = "bad length of field " + name
		return 0
	}
	r.rest = r.rest[n:]
	return int(v)
}
