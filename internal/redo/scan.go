package redo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// MTR is one mini-transaction of a backup redo log, as ScanLinear hands it out.
type MTR struct {
	Start, End uint64 // LSN of its first byte, and LSN after its CRC
	// Recs holds its records up to (not including) the sequence byte, decrypted. It is
	// valid only during the callback.
	Recs []byte
}

// scanChunk is how much of the log ScanLinear reads at a time.
const scanChunk = 8 << 20

// ScanLinear reads the linear backup log at path (BackupHeader then mini-transactions)
// without holding it in memory, and calls fn for each mini-transaction from the
// checkpoint LSN on, in LSN order, up to the end of the valid log. keys and algorithm
// decrypt a FormatKey log; an encrypted log of the 10.8 format (FormatEnc108) is
// refused, since its page records cannot be decrypted here. It returns the log's
// header, checkpoint and end LSN.
func ScanLinear(path string, keys KeyFunc, algorithm string, fn func(MTR) error) (LinearLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return LinearLog{}, fmt.Errorf("open redo log: %w", err)
	}
	defer f.Close()
	return ScanLinearAt(f, path, keys, algorithm, fn)
}

// ScanLinearAt is ScanLinear on a log read through r (named name in errors): a log
// still being written can be parsed as it grows, by an r that waits for its bytes.
func ScanLinearAt(r io.ReaderAt, name string, keys KeyFunc, algorithm string, fn func(MTR) error) (LinearLog, error) {
	var ll LinearLog
	head := make([]byte, StartOffset)
	if _, err := r.ReadAt(head, 0); err != nil {
		return ll, fmt.Errorf("redo log %s: read header: %w", name, err)
	}
	var err error
	if ll.Header, err = ParseHeader(head); err != nil {
		return ll, err
	}
	if ll.Checkpoint, err = ParseCheckpoint(head, ll.Header.FirstLSN); err != nil {
		return ll, err
	}
	if ll.Header.Format == FormatEnc108 {
		return ll, errors.New("redo log in the encrypted 10.8 format: its page records are not read here")
	}
	c, err := NewLogCrypt(ll.Header, keys, algorithm)
	if err != nil {
		return ll, err
	}
	s := scanner{r: r, off: StartOffset, lsn: ll.Header.FirstLSN, g: linear(ll.Header.FirstLSN), nonce: ll.Header.nonceLen(), c: c}
	if c == nil {
		ll.EndLSN, ll.MTRs, err = s.runPipelined(ll.Checkpoint.LSN, fn)
		return ll, err
	}
	err = s.run(ll.Checkpoint.LSN, fn)
	ll.EndLSN, ll.MTRs = s.lsn, s.n
	return ll, err
}

// scanner walks the mini-transactions of a linear log read in chunks.
type scanner struct {
	r     io.ReaderAt
	off   int64 // file offset of buf[pos]
	buf   []byte
	pos   int
	eof   bool
	lsn   uint64
	g     ring
	nonce int
	c     *LogCrypt
	n     int
}

// run parses mini-transactions until the log ends, handing those from lsn from on to fn.
func (s *scanner) run(from uint64, fn func(MTR) error) error {
	for {
		m := parseMtr(s.buf[s.pos:], s.lsn, s.g.seqBit, s.nonce)
		switch m.status {
		case mtrPremature:
			if s.eof {
				return s.endErr()
			}
			if err := s.fill(); err != nil {
				return err
			}
			continue
		case mtrInvalid:
			return nil // zeros or garbage end the log, as for the server
		}
		b := s.buf[s.pos : s.pos+m.size]
		if s.lsn >= from {
			recs := b[:m.seq]
			if s.c != nil {
				var err error
				if recs, err = s.c.Decrypt(recs, b[m.seq+1:m.size-4]); err != nil {
					return fmt.Errorf("backup redo log: LSN %d: %w", s.lsn, err)
				}
			}
			if err := fn(MTR{Start: s.lsn, End: s.lsn + uint64(m.size), Recs: recs}); err != nil {
				return err
			}
		}
		s.pos += m.size
		s.lsn += uint64(m.size)
		s.n++
	}
}

// endErr is why a scan that reached the end of the file stops: nil if nothing but
// zeros follows the last whole mini-transaction, else a truncated one.
func (s *scanner) endErr() error {
	if len(s.buf) > s.pos && s.buf[s.pos] != 0 {
		return fmt.Errorf("backup redo log: truncated mini-transaction at LSN %d", s.lsn)
	}
	return nil
}

// fill keeps the unparsed tail of buf and reads the next chunk after it.
func (s *scanner) fill() error {
	rest := copy(s.buf, s.buf[s.pos:])
	s.off += int64(s.pos)
	s.pos = 0
	if cap(s.buf) < rest+scanChunk {
		nb := make([]byte, rest, rest+scanChunk+MTRSizeMax)
		copy(nb, s.buf[:rest])
		s.buf = nb
	}
	s.buf = s.buf[:rest]
	return s.readMore()
}

// readMore reads the next chunk of the log after the bytes buf holds (from off on).
func (s *scanner) readMore() error {
	rest := len(s.buf)
	s.buf = s.buf[:rest+scanChunk]
	n, err := s.r.ReadAt(s.buf[rest:], s.off+int64(rest))
	s.buf = s.buf[:rest+n]
	if errors.Is(err, io.EOF) {
		s.eof = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read redo log: %w", err)
	}
	return nil
}

// Varint decodes the varint at the start of b (mlog_decode_varint): its value and
// length; n == 0 means b does not start with a valid varint or is too short.
func Varint(b []byte) (v uint64, n int) {
	v, n = decodeVarint(b)
	if n > len(b) {
		return 0, 0
	}
	return v, n
}

// RecordLen returns the total length of the record at the start of b (header byte,
// length varint and body), and false if it is malformed or does not fit in b.
func RecordLen(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n, st := recordSize(b)
	return n, st == mtrOK && n <= len(b)
}

// RecordBody returns the bytes of the record r after its header byte and length varint.
func RecordBody(r []byte) []byte { return recordBody(r) }

// FileOps returns the file-level records leading one mini-transaction's decrypted
// records (MTR.Recs), whose first byte has LSN lsn.
func FileOps(recs []byte, lsn uint64) ([]FileOp, error) { return fileOps(recs, lsn) }

// EmptyLogSize is the size of the log WriteEmpty writes: the header blocks and one
// MiB for the server to start on.
const EmptyLogSize = StartOffset + 1<<20

// EmptyLog returns an unencrypted backup log that holds only a checkpoint at lsn:
// header, checkpoint block 1 = (lsn, lsn) and the FILE_CHECKPOINT(lsn)
// mini-transaction, zero-padded to EmptyLogSize. A server started on a datadir whose
// pages are all at or below lsn then has nothing to recover.
func EmptyLog(lsn uint64, creator string) []byte {
	b := make([]byte, EmptyLogSize)
	copy(b, BackupHeader(Header{Format: FormatPhys}, Checkpoint{LSN: lsn, EndLSN: lsn}, creator))
	m := b[StartOffset:]
	m[0] = recFileCheckpoint | 10 // space 0, page 0, 8-byte LSN
	binary.BigEndian.PutUint64(m[3:], lsn)
	m[11] = linear(lsn).seqBit(lsn + 11)
	binary.BigEndian.PutUint32(m[12:], crc32c(m[:11]))
	return b
}
