package redo

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// MTRSizeMax is the largest mini-transaction the server accepts
// (recv_sys_t::MTR_SIZE_MAX); longer ones are treated as corruption.
const MTRSizeMax = 1 << 20

// mtrStatus is the outcome of parsing one mini-transaction.
type mtrStatus int

const (
	mtrOK        mtrStatus = iota // a complete, valid mini-transaction
	mtrPremature                  // the buffer ends inside it: read more
	mtrInvalid                    // not a valid mini-transaction (end of log, stale or corrupt)
)

// mtr describes one parsed mini-transaction at the start of a buffer.
type mtr struct {
	status mtrStatus
	size   int    // total bytes incl. sequence byte, nonce and CRC (mtrOK)
	seq    int    // index of the sequence (termination) byte (mtrOK)
	reason string // why it is invalid (mtrInvalid)
}

// parseMtr parses the mini-transaction at the start of b, whose first byte
// has LSN lsn. seqBit gives the expected sequence byte for an LSN; nonce is
// the number of nonce bytes after the sequence byte (8 if encrypted).
func parseMtr(b []byte, lsn uint64, seqBit func(uint64) byte, nonce int) mtr {
	if len(b) == 0 {
		return mtr{status: mtrPremature}
	}
	if b[0] <= 1 {
		return mtr{status: mtrInvalid, reason: "no record (end of log)"}
	}
	p, st := skipRecords(b)
	if st.status != mtrOK {
		return st
	}
	if want := seqBit(lsn + uint64(p)); b[p] != want {
		return mtr{status: mtrInvalid, reason: fmt.Sprintf("sequence byte %d, want %d", b[p], want)}
	}
	end := p + 1 + nonce + 4
	if end > len(b) {
		return mtr{status: mtrPremature}
	}
	crc := crc32c(b[:p])
	crc = crc32.Update(crc, castagnoli, b[p+1:p+1+nonce])
	if stored := binary.BigEndian.Uint32(b[end-4:]); crc != stored {
		return mtr{status: mtrInvalid, reason: fmt.Sprintf("CRC-32C %#08x, stored %#08x", crc, stored)}
	}
	return mtr{status: mtrOK, size: end, seq: p}
}

// skipRecords walks the record headers at the start of b and returns the
// index of the termination byte (the first byte <= 1 where a record would
// start).
func skipRecords(b []byte) (int, mtr) {
	p := 0
	for {
		if p >= MTRSizeMax {
			return 0, mtr{status: mtrInvalid, reason: "longer than MTR_SIZE_MAX"}
		}
		if p >= len(b) {
			return 0, mtr{status: mtrPremature}
		}
		if b[p] <= 1 {
			return p, mtr{status: mtrOK}
		}
		n, st := recordSize(b[p:])
		if st != mtrOK {
			_, m := recordLen(b[p:]) // the reason
			return 0, m
		}
		p += n
	}
}

// recordSize returns the total length of the record at the start of b (its header
// byte plus everything after it), and whether it is valid or needs more bytes; it is
// recordLen without the reason, for the hot paths. It does not check that the record
// fits in b.
func recordSize(b []byte) (int, mtrStatus) {
	if n := int(b[0] & 0x0F); n != 0 {
		return 1 + n, mtrOK
	}
	if len(b) < 2 {
		return 0, mtrPremature
	}
	v, n := decodeVarint(b[1:])
	switch {
	case n == 0 || (n <= len(b)-1 && v >= MTRSizeMax):
		return 0, mtrInvalid
	case n > len(b)-1:
		return 0, mtrPremature
	}
	return 1 + int(v) + 15, mtrOK
}

// recordLen returns the total length of the record at the start of b (its
// header byte plus everything after it). It does not check that the record
// fits in b.
func recordLen(b []byte) (int, mtr) {
	if n := int(b[0] & 0x0F); n != 0 {
		return 1 + n, mtr{status: mtrOK}
	}
	if len(b) < 2 {
		return 0, mtr{status: mtrPremature}
	}
	v, n := decodeVarint(b[1:])
	switch {
	case n == 0:
		return 0, mtr{status: mtrInvalid, reason: fmt.Sprintf("invalid length varint %#02x", b[1])}
	case n > len(b)-1:
		return 0, mtr{status: mtrPremature}
	case v >= MTRSizeMax:
		return 0, mtr{status: mtrInvalid, reason: fmt.Sprintf("record length %d", v)}
	}
	return 1 + int(v) + 15, mtr{status: mtrOK}
}
