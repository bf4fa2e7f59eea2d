package redo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/setting"
)

func TestDecodeVarint(t *testing.T) {
	cases := []struct {
		v uint64
		n int
	}{
		{0, 1}, {1, 1}, {127, 1},
		{128, 2}, {300, 2}, {16511, 2},
		{16512, 3}, {100000, 3}, {2113663, 3},
		{2113664, 4}, {100000000, 4}, {270549119, 4},
		{270549120, 5}, {1 << 31, 5}, {270549120 + 0xFFFFFFFF, 5},
	}
	for _, c := range cases {
		enc := encVarint(c.v)
		if len(enc) != c.n {
			t.Fatalf("encVarint(%d) has %d bytes, want %d", c.v, len(enc), c.n)
		}
		v, n := decodeVarint(append(enc, 0xAA))
		if v != c.v || n != c.n {
			t.Errorf("decodeVarint(% x) = %d, %d; want %d, %d", enc, v, n, c.v, c.n)
		}
		if _, n := decodeVarint(enc[:len(enc)-1]); n <= len(enc)-1 {
			t.Errorf("truncated % x: n = %d, want > %d", enc[:len(enc)-1], n, len(enc)-1)
		}
	}
	for c := 0xF1; c <= 0xFF; c++ {
		if _, n := decodeVarint([]byte{byte(c), 0, 0, 0, 0, 0}); n != 0 {
			t.Errorf("first byte %#x: n = %d, want 0 (invalid)", c, n)
		}
	}
}

func TestParseHeaderFixture(t *testing.T) {
	head, _, _ := readFixture(t)
	h, err := ParseHeader(head)
	if err != nil {
		t.Fatal(err)
	}
	if h.Format != FormatPhys || h.Encrypted() || !strings.HasPrefix(h.Creator, "MariaDB 10.11") || h.FirstLSN < StartOffset {
		t.Errorf("header = %+v", h)
	}
	cp, err := ParseCheckpoint(head, h.FirstLSN)
	if err != nil {
		t.Fatal(err)
	}
	if cp.LSN < h.FirstLSN || cp.EndLSN < cp.LSN {
		t.Errorf("checkpoint = %+v", cp)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	head, _, _ := readFixture(t)
	mutate := func(f func(b []byte), fixCRC bool) error {
		b := bytes.Clone(head)
		f(b)
		if fixCRC {
			binary.BigEndian.PutUint32(b[hdrCRCOff:], crc32c(b[:hdrCRCOff]))
		}
		_, err := ParseHeader(b)
		return err
	}
	if err := mutate(func(b []byte) { b[20] ^= 1 }, false); err == nil || errors.Is(err, ErrUnsupportedFormat) {
		t.Errorf("corrupt CRC: err = %v", err)
	}
	if err := mutate(func(b []byte) { b[5] = 1 }, true); err == nil {
		t.Error("non-zero word at offset 4 accepted")
	}
	err := mutate(func(b []byte) { binary.BigEndian.PutUint32(b, formatPHYS) }, true)
	if !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), "10.5") {
		t.Errorf("10.5 format: err = %v", err)
	}
	if err := mutate(func(b []byte) { binary.BigEndian.PutUint32(b, 103) }, true); !errors.Is(err, ErrUnsupportedFormat) {
		t.Errorf("10.4 format: err = %v", err)
	}
	if _, err := ParseHeader(head[:100]); err == nil {
		t.Error("short header accepted")
	}
}

func TestParseCheckpointPicksNewestValid(t *testing.T) {
	b := make([]byte, StartOffset)
	put := func(off int, lsn, end uint64) {
		binary.BigEndian.PutUint64(b[off:], lsn)
		binary.BigEndian.PutUint64(b[off+8:], end)
		binary.BigEndian.PutUint32(b[off+cpCRCOff:], crc32c(b[off:off+cpCRCOff]))
	}
	put(checkpoint1, 20000, 20100)
	put(checkpoint2, 30000, 30016)
	if cp, err := ParseCheckpoint(b, StartOffset); err != nil || cp != (Checkpoint{30000, 30016}) {
		t.Fatalf("both valid: %+v, %v", cp, err)
	}
	b[checkpoint2+3] ^= 0xFF // corrupt the newer one
	if cp, err := ParseCheckpoint(b, StartOffset); err != nil || cp != (Checkpoint{20000, 20100}) {
		t.Fatalf("block 2 corrupt: %+v, %v", cp, err)
	}
	put(checkpoint1, 20000, 19999) // end below LSN
	if _, err := ParseCheckpoint(b, StartOffset); err == nil {
		t.Fatal("no valid block: accepted")
	}
}

func TestBackupHeaderRoundTrip(t *testing.T) {
	h := Header{Format: FormatPhys | FormatEncrypted, FirstLSN: 12288, Creator: "MariaDB 10.11.19"}
	for i := range h.Crypt {
		h.Crypt[i] = byte(i + 1)
	}
	cp := Checkpoint{LSN: 880916143, EndLSN: 880917000}
	b := BackupHeader(h, cp, "ferry 0.1 with a rather long version suffix")
	if len(b) != StartOffset {
		t.Fatalf("len = %d", len(b))
	}
	got, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != h.Format || got.FirstLSN != cp.LSN || got.Crypt != h.Crypt ||
		!strings.HasPrefix(got.Creator, "Backup ferry 0.1") || len(got.Creator) > 31 {
		t.Errorf("header = %+v", got)
	}
	if gotCP, err := ParseCheckpoint(b, got.FirstLSN); err != nil || gotCP != cp {
		t.Errorf("checkpoint = %+v, %v", gotCP, err)
	}
	if !bytes.Equal(b[checkpoint2:], make([]byte, StartOffset-checkpoint2)) {
		t.Error("checkpoint block 2 is not zero")
	}
	if got := BackupHeader(h, cp, "Backup x"); !strings.HasPrefix(string(got[creatorOff:]), "Backup x\x00") {
		t.Errorf("creator with prefix: %q", got[creatorOff:creatorOff+16])
	}
}

func TestOverwrittenErrorText(t *testing.T) {
	err := error(&OverwrittenError{Copied: 880916143, Server: 957199036, Capacity: 16764928})
	want := "redo log was overwritten before it could be copied (copied to LSN 880916143, server at 957199036, capacity 16764928): raise innodb_log_file_size or reduce load/parallelism"
	if err.Error() != want || !errors.Is(err, ErrLogOverwritten) {
		t.Errorf("got %q", err)
	}
	// The command line names the flag, as before the setting was named.
	cli := setting.Render(err, setting.Names{setting.Parallel: "--parallel"})
	if want := strings.Replace(want, "load/parallelism", "load/--parallel", 1); cli != want {
		t.Errorf("rendered for the command line: %q", cli)
	}
}
