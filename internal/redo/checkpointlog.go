package redo

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// FileName is a tablespace and the name the redo log gives its file ("./db/t.ibd").
type FileName struct {
	SpaceID uint32
	Name    string
}

// checkpointMtrMax bounds the records of one FILE_MODIFY mini-transaction that
// CheckpointLog writes, well below MTRSizeMax.
const checkpointMtrMax = 64 << 10

// CheckpointLog returns the start of an unencrypted backup log whose mini-transactions
// from lsn on are copied after it, for a copy whose every page already holds every
// change below lsn: the header, with the checkpoint at cp, then what a server writes at
// a checkpoint (a FILE_MODIFY record for each tablespace in files, and FILE_CHECKPOINT
// naming cp, at the checkpoint block's end LSN), ending exactly at lsn. cp is lsn minus the length of those records, so
// that the copied mini-transactions keep their LSNs. Recovery (the server's, mariadb-backup
// --prepare's, ferry's) then starts at cp, learns the file names from the FILE_MODIFY
// records as it does after any checkpoint, and applies the log from lsn on.
func CheckpointLog(lsn uint64, files []FileName, creator string) (head []byte, cp uint64, err error) {
	files = append([]FileName(nil), files...)
	sort.Slice(files, func(a, b int) bool { return files[a].SpaceID < files[b].SpaceID })
	var mtrs [][]byte
	var recs []byte
	for _, f := range files {
		r, err := fileModifyRecord(f)
		if err != nil {
			return nil, 0, err
		}
		if len(recs)+len(r) > checkpointMtrMax {
			mtrs, recs = append(mtrs, recs), nil
		}
		recs = append(recs, r...)
	}
	if len(recs) > 0 {
		mtrs = append(mtrs, recs)
	}
	checkpoint := make([]byte, 11) // FILE_CHECKPOINT: space 0, page 0, the LSN (set below)
	checkpoint[0] = recFileCheckpoint | 10
	mtrs = append(mtrs, checkpoint)
	size := uint64(0)
	for _, m := range mtrs {
		size += uint64(len(m)) + 1 + 4 // sequence byte and CRC-32C
	}
	if lsn < size+StartOffset {
		return nil, 0, fmt.Errorf("checkpoint log: LSN %d is too small for %d bytes of checkpoint records", lsn, size)
	}
	cp = lsn - size
	binary.BigEndian.PutUint64(checkpoint[3:], cp)
	// The checkpoint block's end LSN is where its FILE_CHECKPOINT record is, as the
	// server writes it: the last mini-transaction, ending at lsn.
	end := lsn - uint64(len(checkpoint)+1+4)
	head = BackupHeader(Header{Format: FormatPhys}, Checkpoint{LSN: cp, EndLSN: end}, creator)
	for _, m := range mtrs {
		head = append(head, m...)
		head = append(head, 1) // the sequence byte of a linear backup log
		head = binary.BigEndian.AppendUint32(head, crc32c(m))
	}
	return head, cp, nil
}

// fileModifyRecord is the FILE_MODIFY record of one tablespace.
func fileModifyRecord(f FileName) ([]byte, error) {
	if f.Name == "" || len(f.Name) > 4096 {
		return nil, fmt.Errorf("checkpoint log: tablespace %d has the file name %q", f.SpaceID, f.Name)
	}
	body := appendVarint(nil, uint64(f.SpaceID))
	body = append(body, 0) // page 0
	body = append(body, f.Name...)
	if len(body) <= 15 {
		return append([]byte{recFileModify | byte(len(body))}, body...), nil
	}
	for l := 1; l <= 5; l++ { // the length varint counts itself: total = 1 + v + 15
		v := uint64(len(body) + l - 15)
		if enc := appendVarint(nil, v); len(enc) == l {
			return append(append([]byte{recFileModify}, enc...), body...), nil
		}
	}
	return nil, fmt.Errorf("checkpoint log: the record of %q is too long", f.Name)
}

// appendVarint appends v in the redo log's varint encoding (mlog_encode_varint).
func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < varint2Base:
		return append(b, byte(v))
	case v < varint3Base:
		v -= varint2Base
		return append(b, 0x80|byte(v>>8), byte(v))
	case v < varint4Base:
		v -= varint3Base
		return append(b, 0xC0|byte(v>>16), byte(v>>8), byte(v))
	case v < varint5Base:
		v -= varint4Base
		return append(b, 0xE0|byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	v -= varint5Base
	return append(b, 0xF0, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
