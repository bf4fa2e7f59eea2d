package redo

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
)

// encVarint encodes v like mlog_encode_varint.
func encVarint(v uint64) []byte {
	switch {
	case v < varint2Base:
		return []byte{byte(v)}
	case v < varint3Base:
		v -= varint2Base
		return []byte{0x80 | byte(v>>8), byte(v)}
	case v < varint4Base:
		v -= varint3Base
		return []byte{0xC0 | byte(v>>16), byte(v >> 8), byte(v)}
	case v < varint5Base:
		v -= varint4Base
		return []byte{0xE0 | byte(v>>24), byte(v >> 16), byte(v >> 8), byte(v)}
	}
	v -= varint5Base
	return []byte{0xF0, byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// record builds one redo record of type typ (high nibble) with body.
func record(typ byte, body []byte) []byte {
	if len(body) <= 15 {
		return append([]byte{typ | byte(len(body))}, body...)
	}
	for l := 1; l <= 5; l++ {
		v := uint64(len(body) + l - 15)
		if enc := encVarint(v); len(enc) == l {
			return append(append([]byte{typ}, enc...), body...)
		}
	}
	panic("record too long")
}

// fileRecord builds a FILE_* record.
func fileRecord(typ byte, space uint32, names ...string) []byte {
	body := append(encVarint(uint64(space)), 0)
	body = append(body, strings.Join(names, "\x00")...)
	return record(typ, body)
}

// writeRecord builds a WRITE page record of n payload bytes.
func writeRecord(space, page uint32, n int) []byte {
	body := append(encVarint(uint64(space)), encVarint(uint64(page))...)
	body = append(body, encVarint(38)...)
	for i := range n {
		body = append(body, byte(i*7+3))
	}
	return record(0x30, body)
}

// frame turns records into a mini-transaction with sequence byte seq and,
// if nonce is not nil, that nonce.
func frame(recs []byte, seq byte, nonce []byte) []byte {
	m := append(append([]byte{}, recs...), seq)
	m = append(m, nonce...)
	crc := crc32c(append(append([]byte{}, recs...), nonce...))
	return binary.BigEndian.AppendUint32(m, crc)
}

// readFixture loads the fixture captured from a real server.
func readFixture(t *testing.T) (head, mtrs []byte, size int64) {
	t.Helper()
	head, err := os.ReadFile(fixtureHead)
	if err != nil {
		t.Fatal(err)
	}
	if mtrs, err = os.ReadFile(fixtureMtrs); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(fixtureMeta)
	if err != nil {
		t.Fatal(err)
	}
	size, err = strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(string(meta)), "size="), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return head, mtrs, size
}

// Fixture files captured from a real MariaDB 10.11 server by
// TestGenerateFixture (run testdata/gen.sh to refresh them).
const (
	fixtureHead = "testdata/head.bin" // the first StartOffset bytes of ib_logfile0
	fixtureMtrs = "testdata/mtrs.bin" // whole mini-transactions from the checkpoint LSN on, as in the file
	fixtureMeta = "testdata/meta.txt" // "size=<ib_logfile0 size>"
	fixtureMax  = 24 << 10
)
