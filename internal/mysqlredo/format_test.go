package mysqlredo

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realHeader is block 0 of #ib_redo5 of a new MySQL 8.0.31 datadir (zeros elided).
func realHeader() []byte {
	b := make([]byte, BlockSize)
	copy(b, []byte{0, 0, 0, 6, 0x40, 0x20, 0xed, 0xbd, 0, 0, 0, 0, 0x00, 0xf9, 0xf8, 0x00})
	copy(b[creatorOff:], "MySQL 8.0.31")
	binary.BigEndian.PutUint32(b[blockCRCOff:], 0xa66b1585)
	return b
}

func TestParseRealHeader(t *testing.T) {
	h, err := ParseHeader(realHeader())
	if err != nil {
		t.Fatal(err)
	}
	want := Header{Format: 6, UUID: 0x4020edbd, StartLSN: 16381952, Creator: "MySQL 8.0.31"}
	if h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if got := h.Block(); string(got) != string(realHeader()) {
		t.Fatal("Block() does not reproduce the server's header block")
	}
	// A checkpoint block of that datadir (LSN 19008524, CRC as mysqld wrote it).
	cp := checkpointBlock(19008524)
	if binary.BigEndian.Uint32(cp[blockCRCOff:]) != 0xa83f15a1 {
		t.Fatalf("checkpoint block CRC %#x, mysqld wrote 0xa83f15a1", binary.BigEndian.Uint32(cp[blockCRCOff:]))
	}
}

func TestParseHeaderMalformed(t *testing.T) {
	reseal := func(f func(b []byte)) []byte {
		b := realHeader()
		f(b)
		sealBlock(b)
		return b
	}
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":          {nil, ErrCorrupt},
		"short":          {realHeader()[:511], ErrCorrupt},
		"bad checksum":   {func() []byte { b := realHeader(); b[20] ^= 1; return b }(), ErrCorrupt},
		"format 5":       {reseal(func(b []byte) { b[3] = 5 }), ErrFormat},
		"format 7":       {reseal(func(b []byte) { b[3] = 7 }), ErrFormat},
		"unaligned":      {reseal(func(b []byte) { b[15] = 3 }), ErrCorrupt},
		"start too low":  {reseal(func(b []byte) { clear(b[8:16]) }), ErrCorrupt},
		"all zero":       {make([]byte, BlockSize), ErrCorrupt},
		"pre-8.0.30 log": {reseal(func(b []byte) { b[3] = 4 }), ErrFormat},
	} {
		if _, err := ParseHeader(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: ParseHeader = %v, want %v", name, err, tc.want)
		}
	}
	// A creator filling all 32 bytes without a NUL is read, not overrun.
	b := reseal(func(b []byte) { copy(b[creatorOff:], strings.Repeat("x", creatorLen)) })
	if h, err := ParseHeader(b); err != nil || h.Creator != strings.Repeat("x", creatorLen) {
		t.Fatalf("32-byte creator: %+v, %v", h, err)
	}
}

func TestParseCheckpoint(t *testing.T) {
	if lsn, err := ParseCheckpoint(checkpointBlock(19008524)); err != nil || lsn != 19008524 {
		t.Fatalf("ParseCheckpoint = %d, %v", lsn, err)
	}
	if _, err := ParseCheckpoint(make([]byte, 100)); err == nil {
		t.Error("short checkpoint block accepted")
	}
	b := checkpointBlock(19008524)
	b[9] ^= 1
	if _, err := ParseCheckpoint(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt checkpoint block: %v", err)
	}
	head := FileHeader(Header{Format: Format, UUID: 1, StartLSN: 8192}, 9000)
	if got := headerCheckpoint(head, 8192, 20000); got != 9000 {
		t.Errorf("headerCheckpoint = %d, want 9000", got)
	}
	if got := headerCheckpoint(head, 9500, 20000); got != 0 {
		t.Errorf("a checkpoint outside the file's range counted: %d", got)
	}
}

func TestCheckBlock(t *testing.T) {
	const lsn = 1 << 30 // epoch 1, hdr_no 2^21+1
	full := func() []byte { return fakeBlock(lsn, lsn+BlockSize) }
	edit := func(f func(b []byte)) []byte {
		b := full()
		f(b)
		sealBlock(b)
		return b
	}
	wrapped := uint64(maxHdrNo) * BlockSize * 3 // epoch 4, hdr_no 1
	cases := []struct {
		name string
		b    []byte
		lsn  uint64
		kind blockKind
	}{
		{"full", full(), lsn, blockValid},
		{"partial", fakeBlock(lsn, lsn+100), lsn, blockValid},
		{"empty", emptyBlock(lsn), lsn, blockValid},
		{"epoch wrap", fakeBlock(wrapped, wrapped+BlockSize), wrapped, blockValid},
		{"flush bit", edit(func(b []byte) { b[0] |= 0x80 }), lsn, blockValid},
		{"no checksum", func() []byte {
			b := full()
			binary.BigEndian.PutUint32(b[blockCRCOff:], noChecksum)
			return b
		}(), lsn, blockValid},
		{"stale", fakeBlock(lsn-BlockSize*100, lsn), lsn, blockStale},
		{"older epoch", fakeBlock(lsn, lsn+BlockSize), wrapped + lsn, blockStale},
		{"ahead", fakeBlock(lsn+BlockSize, lsn+2*BlockSize), lsn, blockAhead},
		{"bad checksum", func() []byte { b := full(); b[100] ^= 1; return b }(), lsn, blockBad},
		{"zero", make([]byte, BlockSize), lsn, blockBad},
		{"data_len 5", edit(func(b []byte) { binary.BigEndian.PutUint16(b[4:], 5) }), lsn, blockBad},
		{"data_len 600", edit(func(b []byte) { binary.BigEndian.PutUint16(b[4:], 600) }), lsn, blockBad},
		{"first_rec_group 3", edit(func(b []byte) { binary.BigEndian.PutUint16(b[6:], 3) }), lsn, blockBad},
		{"first_rec_group 510", edit(func(b []byte) { binary.BigEndian.PutUint16(b[6:], 510) }), lsn, blockBad},
		{"hdr_no 0", edit(func(b []byte) { clear(b[:4]) }), lsn, blockBad},
		{"epoch 0", edit(func(b []byte) { clear(b[8:12]) }), lsn, blockBad},
	}
	for _, tc := range cases {
		info, err := inspectBlock(tc.b, tc.lsn)
		if err != nil || info.kind != tc.kind {
			t.Errorf("%s: kind %d (%s), %v; want %d", tc.name, info.kind, info.reason, err, tc.kind)
		}
		_, err = CheckBlock(tc.b, tc.lsn)
		if (err == nil) != (tc.kind == blockValid) {
			t.Errorf("%s: CheckBlock = %v", tc.name, err)
		}
	}
	enc := full()
	enc[4] |= 0x80
	if _, err := CheckBlock(enc, lsn); !errors.Is(err, ErrEncrypted) || !strings.Contains(err.Error(), "redo log encryption is not supported") {
		t.Errorf("encrypted block: %v", err)
	}
	if _, err := CheckBlock(full()[:100], lsn); err == nil {
		t.Error("short block accepted")
	}
	if _, err := CheckBlock(full(), lsn+1); err == nil {
		t.Error("unaligned LSN accepted")
	}
}

func TestCutBlock(t *testing.T) {
	const lsn = 1 << 20
	b := fakeBlock(lsn, lsn+BlockSize) // first_rec_group = 12 + 2048%300
	fr := int(binary.BigEndian.Uint16(b[6:]))
	cutBlock(b, fr+1)
	if n, err := CheckBlock(b, lsn); err != nil || n != fr+1 || int(binary.BigEndian.Uint16(b[6:])) != fr {
		t.Fatalf("cut after first_rec_group: data_len %d, %v", n, err)
	}
	cutBlock(b, fr)
	if n, err := CheckBlock(b, lsn); err != nil || n != fr || binary.BigEndian.Uint16(b[6:]) != 0 {
		t.Fatalf("cut at first_rec_group: data_len %d, first_rec_group %d, %v", n, binary.BigEndian.Uint16(b[6:]), err)
	}
	for _, c := range b[fr:blockCRCOff] {
		if c != 0 {
			t.Fatal("bytes after the cut are not zero")
		}
	}
}

func TestListFilesMalformed(t *testing.T) {
	good := FileHeader(Header{Format: Format, UUID: 7, StartLSN: 8192}, 8200)
	for name, content := range map[string][]byte{
		"tiny":          good[:100],
		"header only":   good,
		"partial block": append(append([]byte{}, good...), make([]byte, 100)...),
		"bad header":    append(make([]byte, HeaderSize), make([]byte, BlockSize)...),
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "#ib_redo3"), content, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ListFiles(dir); err == nil {
			t.Errorf("%s: ListFiles accepted it", name)
		}
		if _, err := Checkpoint(dir); err == nil {
			t.Errorf("%s: Checkpoint accepted it", name)
		}
	}
}

func TestListFilesAndCheckpoint(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, h Header, cp uint64) {
		b := append(FileHeader(h, cp), make([]byte, 4*BlockSize)...)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := Header{Format: Format, UUID: 7, StartLSN: 8192}
	write("#ib_redo9", h, 8300)
	h.StartLSN += 4 * BlockSize
	write("#ib_redo10", h, 10300)
	write("#ib_redo11_tmp", Header{Format: Format, UUID: 7, StartLSN: 1 << 30}, 1<<30+20)
	write("#ib_redoX", h, 0)
	files, err := ListFiles(dir)
	if err != nil || len(files) != 2 || files[0].ID != 9 || files[1].ID != 10 || files[1].EndLSN != 8192+8*BlockSize {
		t.Fatalf("ListFiles = %+v, %v", files, err)
	}
	if cp, err := Checkpoint(dir); err != nil || cp != 10300 {
		t.Fatalf("Checkpoint = %d, %v; want 10300 (a _tmp spare is never read)", cp, err)
	}
	h.UUID = 8
	write("#ib_redo11", h, 0)
	if _, err := Checkpoint(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("files of two servers: %v", err)
	}
	if _, err := Checkpoint(t.TempDir()); err == nil {
		t.Fatal("Checkpoint of an empty directory succeeded")
	}
	for name, ok := range map[string]bool{"#ib_redo0": true, "#ib_redo12345": true, "#ib_redo": false, "#ib_redo1_tmp": false,
		"#ib_redo-1": false, "#ib_redo99999999999999999999": false, "ib_logfile0": false} {
		if _, got := parseFileName(name); got != ok {
			t.Errorf("parseFileName(%q) = %v", name, got)
		}
	}
}
