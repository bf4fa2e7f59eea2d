package redo

import "fmt"

// LinearLog describes a backup redo log checked by VerifyLinear.
type LinearLog struct {
	Header     Header
	Checkpoint Checkpoint
	EndLSN     uint64   // LSN after the last mini-transaction
	MTRs       int      // number of mini-transactions
	FileOps    []FileOp // file-level records, in log order
}

// VerifyLinear checks a complete linear backup log as written by a Tailer
// (BackupHeader followed by mini-transactions): valid header and checkpoint,
// every mini-transaction from the first LSN on valid with sequence byte 1,
// the checkpoint's end LSN on a mini-transaction boundary, and nothing but
// zero padding after the last one. keys and algorithm read a FormatKey log's
// file-level records (NewLogCrypt); without keys such a log fails with ErrNeedKey.
func VerifyLinear(b []byte, keys KeyFunc, algorithm string) (LinearLog, error) {
	var ll LinearLog
	var err error
	if ll.Header, err = ParseHeader(b); err != nil {
		return ll, err
	}
	if ll.Checkpoint, err = ParseCheckpoint(b, ll.Header.FirstLSN); err != nil {
		return ll, err
	}
	c, err := NewLogCrypt(ll.Header, keys, algorithm)
	if err != nil {
		return ll, err
	}
	g, nonce := linear(ll.Header.FirstLSN), ll.Header.nonceLen()
	lsn, pos, sawEnd := ll.Header.FirstLSN, StartOffset, false
	for ; pos < len(b) && b[pos] != 0; ll.MTRs++ {
		sawEnd = sawEnd || lsn == ll.Checkpoint.EndLSN
		m := parseMtr(b[pos:], lsn, g.seqBit, nonce)
		switch m.status {
		case mtrPremature:
			return ll, fmt.Errorf("backup redo log: truncated mini-transaction at LSN %d", lsn)
		case mtrInvalid:
			return ll, fmt.Errorf("backup redo log: invalid mini-transaction at LSN %d: %s", lsn, m.reason)
		}
		ops, err := mtrFileOps(b[pos:pos+m.size], m, lsn, c)
		if err != nil {
			return ll, fmt.Errorf("backup redo log: %w", err)
		}
		ll.FileOps = append(ll.FileOps, ops...)
		pos += m.size
		lsn += uint64(m.size)
	}
	ll.EndLSN = lsn
	if !sawEnd && lsn != ll.Checkpoint.EndLSN {
		return ll, fmt.Errorf("backup redo log: checkpoint end LSN %d is not a mini-transaction boundary in [%d, %d]",
			ll.Checkpoint.EndLSN, ll.Header.FirstLSN, lsn)
	}
	for ; pos < len(b); pos++ {
		if b[pos] != 0 {
			return ll, fmt.Errorf("backup redo log: non-zero byte at offset %d after the end LSN %d", pos, lsn)
		}
	}
	return ll, nil
}
