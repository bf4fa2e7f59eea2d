package redo

import "fmt"

// copyMtrs validates the mini-transactions at the start of data (LSN t.cur
// on), sets their sequence bytes to 1, reports their file-level records and
// writes them to Out, stopping at the stop LSN, at a mini-transaction that
// runs past data, or at an invalid one. It reports whether t.cur advanced.
func (t *Tailer) copyMtrs(data []byte) (bool, error) {
	pos, err := t.scan(data)
	if err != nil {
		return false, err
	}
	if pos == 0 {
		return false, nil
	}
	if _, err := t.cfg.Out.Write(data[:pos]); err != nil {
		return false, fmt.Errorf("write backup redo log at LSN %d: %w", t.cur, err)
	}
	t.cur += uint64(pos)
	t.prog.advance(t.cur)
	return true, nil
}

// scan walks the valid mini-transactions of data and returns the length of
// the prefix to copy.
func (t *Tailer) scan(data []byte) (int, error) {
	nonce := t.log.hdr.nonceLen()
	pos := 0
	for pos < len(data) {
		lsn := t.cur + uint64(pos)
		if t.stop.reached(lsn) {
			break
		}
		m := parseMtr(data[pos:], lsn, t.log.ring.seqBit, nonce)
		if m.status == mtrPremature {
			break
		}
		if m.status == mtrInvalid {
			return pos, t.invalid(lsn, pos, m.reason)
		}
		if err := t.readRecords(data[pos:pos+m.size], m, lsn); err != nil {
			return 0, err
		}
		data[pos+m.seq] = 1
		pos += m.size
	}
	return pos, nil
}

// invalid handles an invalid mini-transaction at lsn, which is below the
// flushed LSN. The first time it only asks for a re-read; the second time
// (unless the log file was replaced meanwhile) it is corruption.
func (t *Tailer) invalid(lsn uint64, pos int, reason string) error {
	if pos > 0 || t.bad != lsn {
		t.bad = lsn
		return nil // copy what is valid, then re-read from lsn
	}
	if t.next == nil && t.log.replaced() {
		return nil // online resize: the next step switches files
	}
	return fmt.Errorf("%w: invalid mini-transaction at LSN %d (file offset %d of %s, below the flushed LSN): %s",
		ErrCorrupt, lsn, t.log.ring.offset(lsn), t.log.path, reason)
}

// readRecords passes the file-level records of one mini-transaction, b, to OnFileOp
// and the pages it touches to Pages, decrypting its records first in an encrypted log.
func (t *Tailer) readRecords(b []byte, m mtr, lsn uint64) error {
	wantOps := t.cfg.OnFileOp != nil && b[0]&0x80 != 0
	if !wantOps && t.cfg.Pages == nil {
		return nil
	}
	recs := b[:m.seq]
	if t.crypt != nil {
		var err error
		if recs, err = t.crypt.Decrypt(recs, b[m.seq+1:m.size-4]); err != nil {
			return fmt.Errorf("%w: LSN %d: %w", ErrCorrupt, lsn, err)
		}
	}
	if wantOps {
		ops, err := fileOps(recs, lsn)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		for _, op := range ops {
			t.cfg.OnFileOp(op)
		}
	}
	if t.cfg.Pages != nil {
		var err error
		if t.ids, err = mtrPages(recs, t.ids); err != nil {
			return fmt.Errorf("%w: mini-transaction at LSN %d: %w", ErrCorrupt, lsn, err)
		}
		t.cfg.Pages.Add(t.ids...)
	}
	return nil
}
