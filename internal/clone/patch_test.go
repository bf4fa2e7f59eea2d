package clone

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/checksum"
)

// TestRecipientAppliesPatches: patch frames go over a complete file (zeros included,
// even in a sparse one), extend it, are applied once (a resent copy arriving after a
// later round is ignored), and leave the file's checksum that of the first copy
// extended with zeros, as the donor's manifest has it. A patch of a file that is not
// complete, or was never sent, is a protocol error.
func TestRecipientAppliesPatches(t *testing.T) {
	dec, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &receiver{dir: dir, dec: dec, prog: func(int64) {}, files: map[uint64]*rfile{}, byPath: map[string]*rfile{}}
	data := func(seq uint64, flags byte, p []byte, off int64) *frame {
		return &frame{typ: frameData, seq: seq, handle: 1, flags: flags, off: off, rawLen: uint32(len(p)), crc: checksum.Sum(p), path: "db/t.ibd", payload: p}
	}
	base := bytes.Repeat([]byte{'x'}, 64<<10)
	if err := r.applyFrame(data(1, flagSparse, base, 0)); err != nil {
		t.Fatal(err)
	}
	if err := r.applyFrame(data(2, flagPatch, []byte("early"), 0)); !errors.Is(err, errProtocol) {
		t.Fatalf("patch before the file is complete: %v, want a protocol error", err)
	}
	if err := r.applyFrame(&frame{typ: frameClose, seq: 3, handle: 1, flags: flagSparse, off: int64(len(base)), rawLen: 1, path: "db/t.ibd"}); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(base), make([]byte, 16<<10)...)
	zeros := make([]byte, 16<<10)
	round1 := data(4, flagPatch, zeros, 16<<10) // zeros over old bytes of a sparse file
	grow := data(5, flagPatch, bytes.Repeat([]byte{'g'}, 16<<10), 64<<10)
	round2 := data(6, flagPatch, bytes.Repeat([]byte{'n'}, 16<<10), 24<<10) // over half of round1
	// round1 is resent late, after round 2.
	for _, f := range []*frame{round1, grow, round2, round1} {
		if err := r.applyFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	copy(want[16<<10:], zeros)
	copy(want[64<<10:], grow.payload)
	copy(want[24<<10:], round2.payload)
	got, err := os.ReadFile(filepath.Join(dir, "db", "t.ibd"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file after the patches differs (%v)", err)
	}
	sum := r.unpacked().Files["db/t.ibd"]
	if wantCRC := checksum.Extend(checksum.Sum(base), 16<<10); sum.Size != int64(len(want)) || sum.CRC != wantCRC {
		t.Fatalf("file recorded as %d bytes, CRC %08x; want %d, %08x (the first copy extended with zeros)", sum.Size, sum.CRC, len(want), wantCRC)
	}
	bad := data(7, flagPatch, []byte("x"), 0)
	bad.path = "db/other.ibd"
	if err := r.applyFrame(bad); !errors.Is(err, errProtocol) {
		t.Fatalf("patch of a file never sent: %v, want a protocol error", err)
	}
}
