package redo

import (
	"bytes"
	"testing"
)

// fixtureMtrs parses the fixture's mini-transactions with the geometry of
// the real log and returns their start offsets in mtrs.
func fixtureStarts(t *testing.T) (mtrs []byte, lsn uint64, g ring, starts []int) {
	head, mtrs, size := readFixture(t)
	h, err := ParseHeader(head)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ParseCheckpoint(head, h.FirstLSN)
	if err != nil {
		t.Fatal(err)
	}
	g = ring{first: h.FirstLSN, capacity: uint64(size - StartOffset)}
	for pos := 0; pos < len(mtrs); {
		m := parseMtr(mtrs[pos:], cp.LSN+uint64(pos), g.seqBit, 0)
		if m.status != mtrOK {
			t.Fatalf("fixture mtr at +%d: status %d %s", pos, m.status, m.reason)
		}
		starts = append(starts, pos)
		pos += m.size
	}
	return mtrs, cp.LSN, g, starts
}

func TestParseMtrFixture(t *testing.T) {
	mtrs, lsn, _, starts := fixtureStarts(t)
	if len(starts) < 10 {
		t.Fatalf("only %d mtrs in the fixture", len(starts))
	}
	var ops []FileOp
	for i, s := range starts {
		end := len(mtrs)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		m := parseMtr(mtrs[s:end], lsn+uint64(s), func(uint64) byte { return 1 }, 0)
		got, err := fileOps(mtrs[s:s+m.seq], lsn+uint64(s))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, got...)
	}
	want := map[FileOpKind]string{FileCreate: "./fx/t1.ibd", FileRename: "./fx/t1.ibd", FileDelete: "./fx/t2.ibd"}
	for _, op := range ops {
		if name, ok := want[op.Kind]; ok && op.Name == name && (op.Kind != FileRename || op.NewName == "./fx/t2.ibd") {
			delete(want, op.Kind)
		}
	}
	if len(want) != 0 {
		t.Errorf("file ops %+v: missing %v", ops, want)
	}
}

func TestParseMtrCorruptCRC(t *testing.T) {
	mtrs, lsn, g, starts := fixtureStarts(t)
	b := bytes.Clone(mtrs)
	b[starts[1]+1] ^= 0x40
	if m := parseMtr(b[starts[1]:], lsn+uint64(starts[1]), g.seqBit, 0); m.status == mtrOK {
		t.Error("mtr with a flipped bit accepted")
	}
	b = bytes.Clone(mtrs)
	b[starts[2]-1] ^= 1 // last CRC byte of mtr 1
	if m := parseMtr(b[starts[1]:], lsn+uint64(starts[1]), g.seqBit, 0); m.status != mtrInvalid {
		t.Errorf("bad CRC: status %d", m.status)
	}
}

func TestParseMtrWrongSequenceBit(t *testing.T) {
	mtrs, lsn, g, _ := fixtureStarts(t)
	flipped := func(l uint64) byte { return 1 - g.seqBit(l) }
	if m := parseMtr(mtrs, lsn, flipped, 0); m.status != mtrInvalid {
		t.Errorf("previous-lap sequence bit: status %d", m.status)
	}
}

func TestParseMtrTruncated(t *testing.T) {
	mtrs, lsn, g, starts := fixtureStarts(t)
	for _, s := range starts[:min(len(starts), 8)] {
		m := parseMtr(mtrs[s:], lsn+uint64(s), g.seqBit, 0)
		for cut := 0; cut < m.size; cut++ {
			if got := parseMtr(mtrs[s:s+cut], lsn+uint64(s), g.seqBit, 0); got.status != mtrPremature {
				t.Fatalf("mtr at +%d cut to %d of %d bytes: status %d (%s), want premature", s, cut, m.size, got.status, got.reason)
			}
		}
	}
}

func TestParseMtrSynthetic(t *testing.T) {
	one := func(uint64) byte { return 1 }
	long := writeRecord(5, 3, 70000) // 3-byte length varint
	m := frame(append(fileRecord(recFileModify, 5, "./a/b.ibd"), long...), 1, nil)
	if got := parseMtr(m, 100, one, 0); got.status != mtrOK || got.size != len(m) {
		t.Fatalf("long mtr: %+v", got)
	}
	nonce := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	enc := frame(writeRecord(1, 2, 20), 1, nonce)
	if got := parseMtr(enc, 100, one, 8); got.status != mtrOK || got.size != len(enc) {
		t.Errorf("encrypted mtr: %+v", got)
	}
	enc[len(enc)-6] ^= 1 // inside the nonce: covered by the CRC
	if got := parseMtr(enc, 100, one, 8); got.status != mtrInvalid {
		t.Errorf("encrypted mtr with bad nonce: %+v", got)
	}
	huge := append([]byte{0x30}, encVarint(MTRSizeMax)...)
	if got := parseMtr(append(huge, make([]byte, 16)...), 100, one, 0); got.status != mtrInvalid {
		t.Errorf("record longer than MTR_SIZE_MAX: %+v", got)
	}
	if got := parseMtr([]byte{0, 0, 0}, 100, one, 0); got.status != mtrInvalid {
		t.Errorf("zero byte: %+v", got)
	}
}

func TestFileOps(t *testing.T) {
	recs := append(fileRecord(recFileRename, 7, "./d/a.ibd", "./d/b.ibd"), fileRecord(recFileCreate, 8, "./d/c.ibd")...)
	recs = append(recs, 0xfa, 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 0x39) // FILE_CHECKPOINT
	recs = append(recs, writeRecord(8, 0, 4)...)
	recs = append(recs, 0xB2, 0x26, 0xAA) // same-page WRITE after a page record, not FILE_MODIFY
	ops, err := fileOps(recs, 500)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileOp{
		{Kind: FileRename, SpaceID: 7, Name: "./d/a.ibd", NewName: "./d/b.ibd", LSN: 500},
		{Kind: FileCreate, SpaceID: 8, Name: "./d/c.ibd", LSN: 500},
	}
	if len(ops) != len(want) || ops[0] != want[0] || ops[1] != want[1] {
		t.Errorf("ops = %+v", ops)
	}
	if _, err := fileOps(fileRecord(recFileRename, 7, "./d/a.ibd"), 1); err == nil {
		t.Error("FILE_RENAME without a second name accepted")
	}
	if _, err := fileOps(fileRecord(recFileDelete, 0, "./d/a.ibd"), 1); err == nil {
		t.Error("FILE_DELETE of space 0 accepted")
	}
}
