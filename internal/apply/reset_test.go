package apply

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/redo"
)

// The synthetic datadir of the tests below: a system tablespace of 8 full_crc32 16 KiB
// pages, each an image at LSN 1000, and a log whose checkpoint is at synthCheckpoint.
const (
	synthFlags      = innodb.SpaceFlags(1<<4 | 5) // full_crc32, 16 KiB
	synthPages      = 8
	synthCheckpoint = 100000
)

// synthDatadir writes ibdata1 and an ib_logfile0 holding mtrs (each the records of
// one mini-transaction) from the checkpoint on, and returns the datadir.
func synthDatadir(t *testing.T, mtrs ...[][]byte) string {
	t.Helper()
	dir := t.TempDir()
	data := make([]byte, synthPages*16384)
	for no := range uint32(synthPages) {
		p := data[no*16384 : (no+1)*16384]
		binary.BigEndian.PutUint32(p[4:], no)
		if no == 0 {
			binary.BigEndian.PutUint16(p[24:], 8) // FIL_PAGE_TYPE_FSP_HDR
			binary.BigEndian.PutUint32(p[fspSize:], synthPages)
			binary.BigEndian.PutUint32(p[fspFlags:], uint32(synthFlags))
		} else {
			binary.BigEndian.PutUint16(p[24:], 17855) // FIL_PAGE_INDEX
			for i := 38; i < 16000; i++ {
				p[i] = byte(no) ^ byte(i)
			}
		}
		innodb.SealPage(p, 0, no, synthFlags, 1000)
	}
	if err := os.WriteFile(filepath.Join(dir, "ibdata1"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	log := redo.BackupHeader(redo.Header{Format: redo.FormatPhys},
		redo.Checkpoint{LSN: synthCheckpoint, EndLSN: synthCheckpoint}, "ferry test")
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for _, recs := range mtrs {
		m := bytes.Join(recs, nil)
		log = append(log, m...)
		log = append(log, 1) // the sequence byte of a linear backup log
		log = binary.BigEndian.AppendUint32(log, crc32.Checksum(m, castagnoli))
	}
	log = append(log, make([]byte, 4096)...)
	if err := os.WriteFile(filepath.Join(dir, "ib_logfile0"), log, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// synthRec is one page record of type typ (recWrite, recFree...) for page no of the
// system tablespace, with payload after the page id.
func synthRec(typ byte, no uint32, payload []byte) []byte {
	body := append(append(encVarint(0), encVarint(int(no))...), payload...)
	if len(body) > 15 {
		panic("record too long for a test")
	}
	return append([]byte{typ | byte(len(body))}, body...)
}

// synthWrite is a WRITE of data at offset off of page no.
func synthWrite(no uint32, off int, data string) []byte {
	return synthRec(recWrite, no, append(encVarint(off), data...))
}

// readSynthPage reads page no of the synthetic datadir's ibdata1.
func readSynthPage(t *testing.T, dir string, no uint32) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "ibdata1"))
	if err != nil {
		t.Fatal(err)
	}
	return b[no*16384 : (no+1)*16384]
}

// TestLaterFreeDropsEarlierBatches: the records of a page that a later
// mini-transaction frees (or initializes) are dropped even when they fall in an
// earlier batch, as the server's recovery drops them: the image on disk of a page freed
// before it was written back is older than those records, and applying them to it
// refuses a good backup (EXTENDED records find no owner record) or writes garbage.
// Batches of a few bytes put every mini-transaction in a batch of its own.
func TestLaterFreeDropsEarlierBatches(t *testing.T) {
	for _, batch := range []int{1, 256 << 20} {
		dir := synthDatadir(t,
			[][]byte{synthWrite(3, 100, "stale")},  // page 3: freed later
			[][]byte{synthWrite(4, 100, "before")}, // page 4: initialized later
			[][]byte{synthWrite(5, 100, "kept")},   // page 5: nothing later
			[][]byte{synthRec(recFree, 3, nil)},
			[][]byte{synthRec(recInit, 4, nil), synthWrite(4, 200, "after")},
		)
		before3 := bytes.Clone(readSynthPage(t, dir, 3))
		res, err := Dir(context.Background(), Config{Dir: dir, Memory: batch})
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if got := readSynthPage(t, dir, 3); !bytes.Equal(got, before3) {
			t.Errorf("batch %d: page 3, freed at the end of the log, was written (WRITE at %d: %q)", batch, 100, got[100:105])
		}
		p4 := readSynthPage(t, dir, 4)
		if string(p4[100:106]) == "before" || string(p4[200:205]) != "after" {
			t.Errorf("batch %d: page 4 was not rebuilt from its INIT_PAGE alone: %q at 100, %q at 200", batch, p4[100:106], p4[200:205])
		}
		if p5 := readSynthPage(t, dir, 5); string(p5[100:104]) != "kept" {
			t.Errorf("batch %d: page 5 lost its WRITE: %q", batch, p5[100:104])
		}
		if res.Batches < 1 || (batch == 1) != (res.Batches > 1) {
			t.Errorf("batch %d: %d batches", batch, res.Batches)
		}
	}
}
