package mysqlredo

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// scanChunk is how many bytes of a backup log are read at once.
const scanChunk = 1 << 20

// backupLog is the decoded header of a backup log (xtrabackup_logfile layout).
type backupLog struct {
	header     Header
	checkpoint uint64 // A
	first      uint64 // LSN of the first block: A rounded down to 512
	blocks     int64  // number of blocks after the header
}

// readBackupLog reads and validates the header of a backup log of size bytes.
func readBackupLog(r io.ReaderAt, size int64) (backupLog, error) {
	if size < HeaderSize+BlockSize {
		return backupLog{}, fmt.Errorf("%w: backup redo log of %d bytes: shorter than its header and one block", ErrCorrupt, size)
	}
	if rest := (size - HeaderSize) % BlockSize; rest != 0 {
		return backupLog{}, fmt.Errorf("%w: backup redo log of %d bytes ends %d bytes into a block (truncated?)", ErrCorrupt, size, rest)
	}
	head := make([]byte, HeaderSize)
	if _, err := r.ReadAt(head, 0); err != nil {
		return backupLog{}, fmt.Errorf("read backup redo log header: %w", err)
	}
	h, err := ParseHeader(head)
	if err != nil {
		return backupLog{}, fmt.Errorf("backup redo log: %w", err)
	}
	cp, err := backupCheckpoint(head)
	if err != nil {
		return backupLog{}, err
	}
	if cp < h.StartLSN {
		return backupLog{}, fmt.Errorf("%w: backup redo log checkpoint %d is below its header's start LSN %d", ErrCorrupt, cp, h.StartLSN)
	}
	return backupLog{header: h, checkpoint: cp, first: cp / BlockSize * BlockSize,
		blocks: (size - HeaderSize) / BlockSize}, nil
}

// backupCheckpoint returns the larger of a backup log header's valid checkpoints.
func backupCheckpoint(head []byte) (uint64, error) {
	var best uint64
	var errs []error
	for _, off := range []int{checkpoint1, checkpoint2} {
		lsn, err := ParseCheckpoint(head[off:])
		if err != nil {
			errs = append(errs, fmt.Errorf("block at %d: %w", off, err))
		}
		best = max(best, lsn)
	}
	if best == 0 {
		return 0, fmt.Errorf("%w: backup redo log has no valid checkpoint: %w", ErrCorrupt, errors.Join(errs...))
	}
	if err := validDataLSN(best); err != nil {
		return 0, fmt.Errorf("%w: backup redo log checkpoint: %w", ErrCorrupt, err)
	}
	return best, nil
}

// eachBlock reads n blocks of a backup log from its first one, validates each as
// the block of its LSN and passes it to fn (a buffer fn may change) with its data_len.
func eachBlock(r io.ReaderAt, l backupLog, n int64, fn func(b []byte, lsn uint64, dataLen int, noCRC bool) error) error {
	buf := make([]byte, scanChunk)
	for i := int64(0); i < n; {
		k := min(n-i, scanChunk/BlockSize)
		chunk := buf[:k*BlockSize]
		if _, err := r.ReadAt(chunk, HeaderSize+i*BlockSize); err != nil {
			return fmt.Errorf("read backup redo log at offset %d: %w", HeaderSize+i*BlockSize, err)
		}
		for j := int64(0); j < k; j++ {
			b, lsn := chunk[j*BlockSize:(j+1)*BlockSize], l.first+uint64(i+j)*BlockSize
			info, err := inspectBlock(b, lsn)
			if err != nil {
				return err
			}
			if info.kind != blockValid {
				return fmt.Errorf("%w: backup redo log block at LSN %d (offset %d): %s", ErrCorrupt, lsn, HeaderSize+(i+j)*BlockSize, info.reason)
			}
			if err := fn(b, lsn, info.dataLen, info.noCRC); err != nil {
				return err
			}
		}
		i += k
	}
	return nil
}

// Scan verifies a backup log file written by a Tailer (or XtraBackup 8.0): header
// and checkpoint checksums, then every block from the checkpoint's on (hdr_no,
// epoch_no, checksum, lengths), all full but the last. It returns the checkpoint
// A and the LSN where the copied log ends.
func Scan(path string) (start, end uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("open backup redo log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("backup redo log: %w", err)
	}
	return ScanReader(f, st.Size())
}

// ScanReader is Scan of a backup log of size bytes read from r.
func ScanReader(r io.ReaderAt, size int64) (start, end uint64, err error) {
	l, err := readBackupLog(r, size)
	if err != nil {
		return 0, 0, err
	}
	err = eachBlock(r, l, l.blocks, func(_ []byte, lsn uint64, dataLen int, _ bool) error {
		if end != 0 {
			return fmt.Errorf("%w: backup redo log has a block at LSN %d after the partial block ending at %d", ErrCorrupt, lsn, end)
		}
		if dataLen < BlockSize {
			end = lsn + uint64(dataLen)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if end == 0 {
		end = l.first + uint64(l.blocks)*BlockSize
	}
	if end < l.checkpoint {
		return 0, 0, fmt.Errorf("%w: backup redo log ends at LSN %d, before its checkpoint %d", ErrCorrupt, end, l.checkpoint)
	}
	return l.checkpoint, end, nil
}
