package redo

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
)

// LocalizeFileNames rewrites, in a linear backup log (as VerifyLinear takes it), every
// absolute tablespace name in a file-level record (a DATA DIRECTORY table's
// "/disk/db/t.ibd") into a relative name of the same length that opens the copy
// inside the backup ("./////db/t.ibd"), and fixes the mini-transaction's CRC-32C.
// The stock server's recovery opens the names the log holds: without this, preparing
// a backup would open, and write to, the source server's live tablespace where it
// exists. Lengths are kept, so no LSN moves. It returns how many names it rewrote.
func LocalizeFileNames(b []byte) (int, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return 0, err
	}
	g, nonce := linear(h.FirstLSN), h.nonceLen()
	lsn, pos, n := h.FirstLSN, StartOffset, 0
	for pos < len(b) && b[pos] != 0 {
		m := parseMtr(b[pos:], lsn, g.seqBit, nonce)
		if m.status != mtrOK {
			break // the end of the log (VerifyLinear tells a damaged one)
		}
		k, err := localizeMtr(b[pos:pos+m.seq], lsn)
		if err != nil {
			return n, err
		}
		if k > 0 {
			if nonce > 0 {
				return n, fmt.Errorf("the encrypted redo log names a tablespace outside the datadir at LSN %d: such a backup cannot be prepared yet", lsn)
			}
			crc := crc32c(b[pos : pos+m.seq])
			crc = crc32.Update(crc, castagnoli, b[pos+m.seq+1:pos+m.seq+1+nonce])
			binary.BigEndian.PutUint32(b[pos+m.size-4:], crc)
			n += k
		}
		pos += m.size
		lsn += uint64(m.size)
	}
	return n, nil
}

// localizeMtr rewrites the absolute names of the leading file-level records of one
// mini-transaction's records in place.
func localizeMtr(recs []byte, lsn uint64) (int, error) {
	n := 0
	for p := 0; p < len(recs) && recs[p]&0x80 != 0; {
		l, st := recordLen(recs[p:])
		if st.status != mtrOK || p+l > len(recs) {
			return n, fmt.Errorf("file-level record at LSN %d: bad length", lsn)
		}
		typ := recs[p] & 0xF0
		if typ >= recFileCreate && typ <= recFileModify {
			k, err := localizeRecord(recordBody(recs[p:p+l]), lsn)
			if err != nil {
				return n, err
			}
			n += k
		}
		p += l
	}
	return n, nil
}

// localizeRecord rewrites the name(s) after the space id and page number varints.
func localizeRecord(body []byte, lsn uint64) (int, error) {
	_, a := decodeVarint(body)
	if a == 0 || a > len(body) {
		return 0, fmt.Errorf("file-level record at LSN %d: bad space id", lsn)
	}
	_, c := decodeVarint(body[a:])
	if c == 0 || a+c > len(body) {
		return 0, fmt.Errorf("file-level record at LSN %d: bad page number", lsn)
	}
	n := 0
	for _, name := range bytes.Split(body[a+c:], []byte{0}) {
		if len(name) == 0 || name[0] != '/' {
			continue
		}
		local, err := LocalName(string(name))
		if err != nil {
			return n, fmt.Errorf("file-level record at LSN %d: %w", lsn, err)
		}
		copy(name, local)
		n++
	}
	return n, nil
}

// LocalName is the relative name of the same length as the absolute tablespace path
// abs that names the same table inside a datadir: "." and slashes, then "db/t.ibd"
// (the last two components of abs). The server derives a tablespace's name from the
// last two components, so it stays "db/t".
func LocalName(abs string) (string, error) {
	parts := strings.Split(abs, "/")
	if len(parts) < 3 || parts[len(parts)-1] == "" || parts[len(parts)-2] == "" {
		return "", fmt.Errorf("tablespace path %q is not DIR/db/table.ibd", abs)
	}
	rel := parts[len(parts)-2] + "/" + parts[len(parts)-1]
	pad := len(abs) - len(rel)
	if pad < 2 {
		return "", fmt.Errorf("tablespace path %q is too short to be named inside the datadir", abs)
	}
	return "." + strings.Repeat("/", pad-1) + rel, nil
}
