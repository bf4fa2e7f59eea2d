package redo

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Checkpoint block layout (log_t::write_checkpoint).
const (
	checkpoint1   = 4096
	checkpoint2   = 8192
	cpCRCOff      = 60
	cpZeroFrom    = 16
	checkpointLen = 64
)

// Checkpoint is a checkpoint block: all changes below LSN are in the data
// files; EndLSN is where the checkpoint's own mini-transaction (FILE_MODIFY
// records and FILE_CHECKPOINT(LSN)) starts.
type Checkpoint struct {
	LSN    uint64
	EndLSN uint64
}

// ParseCheckpoint returns the newest valid checkpoint block of head, the
// first StartOffset bytes of ib_logfile0. A block is valid when its CRC-32C
// matches, bytes 16..59 are zero and firstLSN <= LSN <= EndLSN.
func ParseCheckpoint(head []byte, firstLSN uint64) (Checkpoint, error) {
	if len(head) < StartOffset {
		return Checkpoint{}, fmt.Errorf("redo log checkpoints: %d bytes, need %d", len(head), StartOffset)
	}
	var best Checkpoint
	var errs []error
	for _, off := range []int{checkpoint1, checkpoint2} {
		cp, err := parseCheckpointBlock(head[off:off+checkpointLen], firstLSN)
		if err != nil {
			errs = append(errs, fmt.Errorf("block at %d: %w", off, err))
			continue
		}
		if cp.LSN > best.LSN {
			best = cp
		}
	}
	if best.LSN == 0 {
		return Checkpoint{}, fmt.Errorf("redo log has no valid checkpoint: %w", errors.Join(errs...))
	}
	return best, nil
}

// parseCheckpointBlock validates one 64-byte checkpoint block.
func parseCheckpointBlock(b []byte, firstLSN uint64) (Checkpoint, error) {
	if got, want := crc32c(b[:cpCRCOff]), binary.BigEndian.Uint32(b[cpCRCOff:]); got != want {
		return Checkpoint{}, fmt.Errorf("CRC-32C %#08x, stored %#08x", got, want)
	}
	for _, c := range b[cpZeroFrom:cpCRCOff] {
		if c != 0 {
			return Checkpoint{}, errors.New("reserved bytes are not zero")
		}
	}
	cp := Checkpoint{LSN: binary.BigEndian.Uint64(b), EndLSN: binary.BigEndian.Uint64(b[8:])}
	if cp.LSN < firstLSN || cp.EndLSN < cp.LSN {
		return Checkpoint{}, fmt.Errorf("LSN %d, end LSN %d outside the log starting at %d", cp.LSN, cp.EndLSN, firstLSN)
	}
	return cp, nil
}

// NewestCheckpoint reads the newest checkpoint a running server has written to its
// log at path (the checkpoint a redo copy opened now would start from).
func NewestCheckpoint(path string) (Checkpoint, error) {
	l, err := openLog(path)
	if err != nil {
		return Checkpoint{}, err
	}
	defer l.close()
	cp, err := ParseCheckpoint(l.head, l.hdr.FirstLSN)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("redo log %s: %w", path, err)
	}
	return cp, nil
}
