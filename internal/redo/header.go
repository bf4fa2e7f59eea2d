package redo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// StartOffset is the file offset of the first mini-transaction byte
// (log_t::START_OFFSET); everything before it is header and checkpoints.
const StartOffset = 12288

// Header block layout (log_t::header_write).
const (
	// HeaderSize is the size of the header block that ParseHeader reads.
	HeaderSize = 512
	// FormatPhys is the 10.8+ format tag "Phys" (log_t::FORMAT_10_8).
	FormatPhys uint32 = 0x50687973
	// FormatEncrypted is the bit set in the format tag of an encrypted log.
	FormatEncrypted uint32 = 0x80000000
	// FormatEnc108 is the 10.8 encrypted format (log_t::FORMAT_ENC_10_8): page
	// records' payloads are encrypted, file-level records are not.
	FormatEnc108 = FormatPhys | FormatEncrypted
	// FormatKey is the encrypted format MariaDB 10.11.19 writes (log_t::FORMAT_ENC_11,
	// U+1F5DD "old key" in UTF-8, checked on a real server): everything but the
	// records' type and length bytes is encrypted, file names too, so reading the
	// file-level records needs the key (LogCrypt).
	FormatKey uint32 = 0xf09f979d
	// formatPHYS is the 10.5–10.7 tag "PHYS" (log_t::FORMAT_10_5).
	formatPHYS uint32 = 0x50485953

	creatorOff = 16
	creatorLen = 32
	cryptOff   = 48
	hdrCRCOff  = 508
)

// ErrUnsupportedFormat reports a redo log that is not in the MariaDB 10.8+
// format, e.g. one written by 10.5–10.7 ("PHYS") or by an older server.
var ErrUnsupportedFormat = errors.New("unsupported redo log format (MariaDB 10.8 or later is required)")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c returns the CRC-32C (Castagnoli) of b.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Header is the decoded header block of ib_logfile0.
type Header struct {
	Format   uint32   // format tag: FormatPhys, FormatEnc108 or FormatKey
	FirstLSN uint64   // LSN stored at file offset StartOffset
	Creator  string   // e.g. "MariaDB 10.11.19" or "Backup 10.11.19"
	Crypt    [28]byte // header bytes 48..75: encryption key id, version, message, nonce
}

// Encrypted reports whether the log is encrypted (innodb_encrypt_log=ON);
// its mini-transactions then carry an 8-byte nonce after the sequence byte.
func (h Header) Encrypted() bool { return h.Format != FormatPhys }

// RecordsEncrypted reports whether the file-level records are encrypted too
// (FormatKey), so that reading them needs a LogCrypt.
func (h Header) RecordsEncrypted() bool { return h.Format == FormatKey }

// nonceLen is the number of nonce bytes after each sequence byte.
func (h Header) nonceLen() int {
	if h.Encrypted() {
		return 8
	}
	return 0
}

// ParseHeader decodes and validates the first 512 bytes of ib_logfile0:
// the format tag, the zero word at offset 4 and the CRC-32C at offset 508.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("redo log header: %d bytes, need %d", len(b), HeaderSize)
	}
	format := binary.BigEndian.Uint32(b)
	if format != FormatPhys && format != FormatEnc108 && format != FormatKey {
		return Header{}, fmt.Errorf("redo log format %#08x: %w", format, formatHint(format))
	}
	if z := binary.BigEndian.Uint32(b[4:]); z != 0 {
		return Header{}, fmt.Errorf("redo log header: word at offset 4 is %#x, must be 0", z)
	}
	if got, want := crc32c(b[:hdrCRCOff]), binary.BigEndian.Uint32(b[hdrCRCOff:]); got != want {
		return Header{}, fmt.Errorf("redo log header: CRC-32C %#08x, stored %#08x", got, want)
	}
	h := Header{Format: format, FirstLSN: binary.BigEndian.Uint64(b[8:])}
	h.Creator = strings.TrimRight(string(b[creatorOff:creatorOff+creatorLen]), "\x00")
	copy(h.Crypt[:], b[cryptOff:])
	if h.FirstLSN < StartOffset {
		return Header{}, fmt.Errorf("redo log header: first LSN %d is below %d", h.FirstLSN, StartOffset)
	}
	return h, nil
}

// formatHint wraps ErrUnsupportedFormat with the server version a format
// tag belongs to, where known.
func formatHint(format uint32) error {
	if format&^FormatEncrypted == formatPHYS {
		return fmt.Errorf("%w: written by MariaDB 10.5–10.7", ErrUnsupportedFormat)
	}
	return ErrUnsupportedFormat
}
