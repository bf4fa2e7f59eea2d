package redo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckpointLog: a log made of CheckpointLog's head and mini-transactions copied
// from lsn on scans from the checkpoint it names: the FILE_MODIFY records give every
// name back (short, long, and enough of them for several mini-transactions), the
// FILE_CHECKPOINT names the checkpoint at the block's end LSN, and the copied
// mini-transaction keeps its LSN.
func TestCheckpointLog(t *testing.T) {
	files := []FileName{{SpaceID: 7, Name: "./a.ibd"}, {SpaceID: 3, Name: "./db/" + strings.Repeat("x", 300) + ".ibd"}}
	for i := range 3000 {
		files = append(files, FileName{SpaceID: uint32(100 + i), Name: fmt.Sprintf("./db%d/table_with_a_long_name_%d.ibd", i%7, i)})
	}
	const lsn = 5_000_000
	head, cp, err := CheckpointLog(lsn, files, "ferry test")
	if err != nil {
		t.Fatal(err)
	}
	if got := cp + uint64(len(head)-StartOffset); got != lsn {
		t.Fatalf("checkpoint %d + %d bytes of records ends at %d, not %d", cp, len(head)-StartOffset, got, lsn)
	}
	copied := frame(writeRecord(7, 3, 20), 1, nil)
	path := filepath.Join(t.TempDir(), "ib_logfile0")
	if err := os.WriteFile(path, append(append(head, copied...), make([]byte, 512)...), 0o600); err != nil {
		t.Fatal(err)
	}
	names := map[uint32]string{}
	var mtrs []MTR
	var checkpointAt uint64
	ll, err := ScanLinear(path, nil, "", func(m MTR) error {
		ops, err := FileOps(m.Recs, m.Start)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if op.Kind != FileModify {
				t.Errorf("LSN %d: %v, want only FILE_MODIFY", m.Start, op.Kind)
			}
			names[op.SpaceID] = op.Name
		}
		if m.Recs[0]&0xF0 == recFileCheckpoint {
			checkpointAt = m.Start
			if got := binaryLSN(m.Recs); got != cp {
				t.Errorf("FILE_CHECKPOINT names LSN %d, want the checkpoint %d", got, cp)
			}
		}
		mtrs = append(mtrs, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ll.Checkpoint.LSN != cp || ll.Checkpoint.EndLSN != checkpointAt || ll.EndLSN != lsn+uint64(len(copied)) {
		t.Errorf("scanned checkpoint %+v (FILE_CHECKPOINT at %d), end %d; want checkpoint %d, end %d", ll.Checkpoint, checkpointAt, ll.EndLSN, cp, lsn+uint64(len(copied)))
	}
	for _, f := range files {
		if names[f.SpaceID] != f.Name {
			t.Fatalf("tablespace %d: FILE_MODIFY gives %q, want %q", f.SpaceID, names[f.SpaceID], f.Name)
		}
	}
	if last := mtrs[len(mtrs)-1]; last.Start != lsn || len(mtrs) < 4 {
		t.Errorf("%d mini-transactions, the last at LSN %d; want several FILE_MODIFY ones, then the copied one at %d", len(mtrs), last.Start, lsn)
	}
}

// binaryLSN is the LSN a FILE_CHECKPOINT record (space 0, page 0) carries.
func binaryLSN(recs []byte) uint64 {
	var v uint64
	for _, b := range recs[3:11] {
		v = v<<8 | uint64(b)
	}
	return v
}
