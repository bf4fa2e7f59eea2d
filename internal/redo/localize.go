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
// exists. Lengths are kept, so no LSN moves. keys and algorithm read and re-encrypt
// the records of a FormatKey log (NewLogCrypt). It returns how many names it rewrote.
func LocalizeFileNames(b []byte, keys KeyFunc, algorithm string) (int, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return 0, err
	}
	c, err := NewLogCrypt(h, keys, algorithm)
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
		k, err := localizeOne(b[pos:pos+m.size], m, lsn, c)
		if err != nil {
			return n, err
		}
		n += k
		pos += m.size
		lsn += uint64(m.size)
	}
	return n, nil
}

// localizeOne localizes the names of one valid mini-transaction, b (parsed as m),
// decrypting and re-encrypting its records with c for a FormatKey log.
func localizeOne(b []byte, m mtr, lsn uint64, c *LogCrypt) (int, error) {
	if b[0]&0x80 == 0 {
		return 0, nil
	}
	recs, nonce := b[:m.seq], b[m.seq+1:m.size-4]
	if c != nil {
		var err error
		if recs, err = c.Decrypt(recs, nonce); err != nil {
			return 0, fmt.Errorf("LSN %d: %w", lsn, err)
		}
	}
	k, err := localizeMtr(recs, lsn)
	if err != nil || k == 0 {
		return 0, err
	}
	if c != nil {
		if err := c.Encrypt(recs, nonce); err != nil {
			return 0, err
		}
		copy(b, recs)
	}
	crc := crc32c(b[:m.seq])
	crc = crc32.Update(crc, castagnoli, nonce)
	binary.BigEndian.PutUint32(b[m.size-4:], crc)
	return k, nil
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
