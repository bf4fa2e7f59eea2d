package redo

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/ferry-backup/ferry/internal/aesnopad"
)

// KeyFunc returns the key management plugin's key with an id and version.
type KeyFunc func(id, version uint32) ([]byte, error)

// logKeyID is the key id the server encrypts its redo log with
// (LOG_DEFAULT_ENCRYPTION_KEY).
const logKeyID = 1

// LogCrypt reads and rewrites the records of a FormatKey redo log. The server
// encrypts each mini-transaction as one stream: the records' bodies, concatenated
// (their type and length bytes stay clear), under the log's record key, an AES-128
// key that is the header's 16-byte message encrypted (AES-ECB) with the plugin's key 1.
// The IV is the 8-byte nonce after the sequence byte followed by the first record's
// type and length bytes, zero-padded. The mode is the plugin's algorithm: CTR, or CBC
// whose final partial block is XORed with the IV encrypted (MariaDB's no-padding rule).
type LogCrypt struct {
	block cipher.Block
	ctr   bool
}

// NewLogCrypt derives the record key of the log whose header is h from the plugin's
// keys; algorithm is file_key_management_encryption_algorithm (aes_cbc or aes_ctr).
// It returns nil for a log whose records it need not read (not FormatKey).
func NewLogCrypt(h Header, keys KeyFunc, algorithm string) (*LogCrypt, error) {
	if !h.RecordsEncrypted() {
		return nil, nil
	}
	var ctr bool
	switch strings.ToLower(algorithm) {
	case "aes_cbc", "":
	case "aes_ctr":
		ctr = true
	default:
		return nil, fmt.Errorf("redo log encryption algorithm %q: want aes_cbc or aes_ctr", algorithm)
	}
	if id := binary.BigEndian.Uint32(h.Crypt[0:]); id != logKeyID {
		return nil, fmt.Errorf("redo log header: encryption key id %d, want %d", id, logKeyID)
	}
	version := binary.BigEndian.Uint32(h.Crypt[4:])
	if keys == nil {
		return nil, ErrNeedKey
	}
	key, err := keys(logKeyID, version)
	if err != nil {
		return nil, fmt.Errorf("the redo log's key (id %d, version %d): %w", logKeyID, version, err)
	}
	kb, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("the redo log's key (id %d): %w", logKeyID, err)
	}
	recKey := make([]byte, aes.BlockSize)
	kb.Encrypt(recKey, h.Crypt[8:24])
	block, err := aes.NewCipher(recKey)
	if err != nil {
		return nil, err
	}
	return &LogCrypt{block: block, ctr: ctr}, nil
}

// Decrypt returns a copy of recs, one mini-transaction's records up to its
// sequence byte, with their bodies decrypted; nonce is the 8 bytes after the
// sequence byte.
func (c *LogCrypt) Decrypt(recs, nonce []byte) ([]byte, error) {
	out := append([]byte(nil), recs...)
	return out, c.crypt(out, nonce, false)
}

// Encrypt encrypts in place the bodies of plain, records as Decrypt returns them.
func (c *LogCrypt) Encrypt(plain, nonce []byte) error { return c.crypt(plain, nonce, true) }

// crypt gathers the record bodies of recs, transforms them as one stream and puts
// them back.
func (c *LogCrypt) crypt(recs, nonce []byte, encrypt bool) error {
	if len(nonce) != 8 {
		return errors.New("encrypted mini-transaction: nonce is not 8 bytes")
	}
	var spans [][2]int
	var iv [aes.BlockSize]byte
	copy(iv[:], nonce)
	total := 0
	for p := 0; p < len(recs) && recs[p] > 1; {
		n, st := recordLen(recs[p:])
		if st.status != mtrOK || p+n > len(recs) {
			return errors.New("encrypted mini-transaction: bad record length")
		}
		h := recordHeaderLen(recs[p:])
		if p == 0 {
			copy(iv[8:], recs[:h])
		}
		spans = append(spans, [2]int{p + h, p + n})
		total += n - h
		p += n
	}
	stream := make([]byte, 0, total)
	for _, s := range spans {
		stream = append(stream, recs[s[0]:s[1]]...)
	}
	c.transform(stream, iv[:], encrypt)
	for _, s := range spans {
		stream = stream[copy(recs[s[0]:s[1]], stream):]
	}
	return nil
}

// transform encrypts or decrypts b in place with the record key and iv.
func (c *LogCrypt) transform(b, iv []byte, encrypt bool) {
	aesnopad.Transform(c.block, c.ctr, b, iv, encrypt)
}

// recordHeaderLen is the number of type and length bytes at the start of record r.
func recordHeaderLen(r []byte) int {
	if r[0]&0x0F != 0 {
		return 1
	}
	return 1 + varintLen(r[1])
}

// ErrWrongKey means the key given does not decrypt the log.
var ErrWrongKey = errors.New("the key does not decrypt the redo log")

// CheckKey checks, for a linear backup log b whose records are encrypted
// (FormatKey), that keys decrypt it (see decryptsCheckpoint). A log whose records
// are not encrypted passes.
func CheckKey(b []byte, keys KeyFunc, algorithm string) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	c, err := NewLogCrypt(h, keys, algorithm)
	if err != nil || c == nil {
		return err
	}
	cp, err := ParseCheckpoint(b, h.FirstLSN)
	if err != nil {
		return err
	}
	g := linear(h.FirstLSN)
	for lsn, pos := h.FirstLSN, StartOffset; pos < len(b) && lsn < cp.EndLSN; {
		m := parseMtr(b[pos:], lsn, g.seqBit, h.nonceLen())
		if m.status != mtrOK {
			break
		}
		pos += m.size
		lsn += uint64(m.size)
		if lsn == cp.EndLSN {
			return decryptsCheckpoint(b[pos:], cp, g.seqBit, c)
		}
	}
	if h.FirstLSN == cp.EndLSN {
		return decryptsCheckpoint(b[StartOffset:], cp, g.seqBit, c)
	}
	return fmt.Errorf("backup redo log: no mini-transaction at the checkpoint's end LSN %d", cp.EndLSN)
}

// CheckLogKey checks that keys decrypt the live redo log at path of a server that
// encrypts it (FormatKey), before a copy starts; another log passes.
func CheckLogKey(path string, keys KeyFunc, algorithm string) error {
	l, err := openLog(path)
	if err != nil {
		return err
	}
	defer l.close()
	c, err := NewLogCrypt(l.hdr, keys, algorithm)
	if err != nil || c == nil {
		return err
	}
	cp, err := ParseCheckpoint(l.head, l.hdr.FirstLSN)
	if err != nil {
		return fmt.Errorf("redo log %s: %w", path, err)
	}
	n := int(min(uint64(minReadSize), l.ring.capacity))
	data, err := l.readLSN(alignedBuf(n+2*align), cp.EndLSN, n)
	if err != nil {
		return err
	}
	return decryptsCheckpoint(data, cp, l.ring.seqBit, c)
}

// decryptsCheckpoint parses the mini-transaction at the start of data, at the
// checkpoint's end LSN, and checks that c decrypts its FILE_CHECKPOINT record to
// the checkpoint LSN: 8 bytes a wrong key turns into noise.
func decryptsCheckpoint(data []byte, cp Checkpoint, seqBit func(uint64) byte, c *LogCrypt) error {
	m := parseMtr(data, cp.EndLSN, seqBit, 8)
	if m.status != mtrOK {
		return fmt.Errorf("redo log: no valid mini-transaction at the checkpoint's end LSN %d: %s", cp.EndLSN, m.reason)
	}
	plain, err := c.Decrypt(data[:m.seq], data[m.seq+1:m.size-4])
	if err != nil {
		return err
	}
	for p := 0; p < len(plain) && plain[p] > 1; {
		n, st := recordLen(plain[p:])
		if st.status != mtrOK || p+n > len(plain) {
			break
		}
		if body := recordBody(plain[p : p+n]); plain[p]&0xF0 == recFileCheckpoint && len(body) == 10 &&
			body[0] == 0 && body[1] == 0 && binary.BigEndian.Uint64(body[2:]) == cp.LSN {
			return nil
		}
		p += n
	}
	return ErrWrongKey
}
