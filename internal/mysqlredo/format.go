package mysqlredo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sizes and limits of the 8.0.30+ redo log (log0constants.h).
const (
	// BlockSize is the size of a log block and of each of the four header blocks.
	BlockSize = 512
	// HeaderSize is the size of a redo file's header (LOG_FILE_HDR_SIZE): the file
	// header, a checkpoint block, the encryption header and another checkpoint block.
	HeaderSize = 4 * BlockSize
	// Format is the only log format this package reads (Log_format::VERSION_8_0_30).
	Format = 6
	// MaxFileSize is the largest redo file mysqld opens (LOG_FILE_MAX_SIZE).
	MaxFileSize = 16 << 30

	blockHdrSize  = 12            // hdr_no, data_len, first_rec_group, epoch_no
	blockCRCOff   = BlockSize - 4 // the block's checksum, also the header blocks'
	noChecksum    = 0xDEADBEEF    // written instead of the CRC with innodb_log_checksums=OFF
	encryptedBit  = 0x8000        // in data_len: the block is encrypted
	flushBit      = 1 << 31       // in hdr_no: the old flush bit, ignored
	maxHdrNo      = 1 << 30       // hdr_no counts blocks modulo 2^30, epoch_no the wraps
	creatorOff    = 16
	creatorLen    = 32
	flagsOff      = 48
	checkpointLSN = 8 // offset of the LSN in a checkpoint block
	checkpoint1   = BlockSize
	checkpoint2   = 3 * BlockSize
)

// Header flags (Log_file_header::m_flags: bit n is mask 1<<(n-1)).
const (
	FlagNoLogging      uint32 = 1 << 0 // redo logging disabled (ALTER INSTANCE DISABLE INNODB REDO_LOG)
	FlagCrashUnsafe    uint32 = 1 << 1 // the server stopped while redo logging was disabled
	FlagNotInitialized uint32 = 1 << 2 // the file is being created
	FlagFileFull       uint32 = 1 << 3 // the file is full: a newer one follows
)

// Errors of the format layer.
var (
	// ErrEncrypted is returned for a log block written with innodb_redo_log_encrypt=ON.
	ErrEncrypted = errors.New("redo log encryption is not supported (innodb_redo_log_encrypt=ON): turn it off before the backup")
	// ErrFormat is wrapped by the errors for a header of another log format.
	ErrFormat = errors.New("unsupported redo log format (MySQL 8.0.30 or later is required)")
	// ErrCorrupt is wrapped by the errors for invalid headers, checkpoints and blocks.
	ErrCorrupt = errors.New("corrupt redo log")
)

// crc32c returns the CRC-32C of b (ut_crc32). MakeTable returns the standard
// library's shared Castagnoli table.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// sealBlock stores the CRC-32C of a 512-byte block's first 508 bytes in its last 4.
func sealBlock(b []byte) { binary.BigEndian.PutUint32(b[blockCRCOff:], crc32c(b[:blockCRCOff])) }

// crcOK reports whether a 512-byte block's stored CRC-32C matches.
func crcOK(b []byte) bool { return binary.BigEndian.Uint32(b[blockCRCOff:]) == crc32c(b[:blockCRCOff]) }

// Header is a redo file's header block (block 0).
type Header struct {
	Format   uint32 // Format
	UUID     uint32 // log_uuid: the same in every file of a server
	StartLSN uint64 // LSN of the file's first data block, a multiple of 512
	Creator  string // "MySQL 8.0.31", "MySQL Clone", "xtrabkup ..."
	Flags    uint32 // Flag* bits
}

// ParseHeader decodes and validates a header block, the first 512 bytes of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < BlockSize {
		return Header{}, fmt.Errorf("%w: header block of %d bytes, need %d", ErrCorrupt, len(b), BlockSize)
	}
	b = b[:BlockSize]
	if !crcOK(b) {
		return Header{}, fmt.Errorf("%w: header block checksum mismatch (stored %#08x, computed %#08x)",
			ErrCorrupt, binary.BigEndian.Uint32(b[blockCRCOff:]), crc32c(b[:blockCRCOff]))
	}
	h := Header{Format: binary.BigEndian.Uint32(b), UUID: binary.BigEndian.Uint32(b[4:]),
		StartLSN: binary.BigEndian.Uint64(b[8:]), Creator: cString(b[creatorOff : creatorOff+creatorLen]),
		Flags: binary.BigEndian.Uint32(b[flagsOff:])}
	if h.Format != Format {
		return Header{}, fmt.Errorf("%w: header says format %d, not %d", ErrFormat, h.Format, Format)
	}
	if h.StartLSN%BlockSize != 0 || h.StartLSN < 16*BlockSize {
		return Header{}, fmt.Errorf("%w: header start LSN %d is not a block start at or above %d", ErrCorrupt, h.StartLSN, 16*BlockSize)
	}
	return h, nil
}

// cString returns b up to its first NUL byte.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Block encodes h as a 512-byte header block with its CRC-32C.
func (h Header) Block() []byte {
	b := make([]byte, BlockSize)
	binary.BigEndian.PutUint32(b, h.Format)
	binary.BigEndian.PutUint32(b[4:], h.UUID)
	binary.BigEndian.PutUint64(b[8:], h.StartLSN)
	copy(b[creatorOff:creatorOff+creatorLen-1], h.Creator)
	binary.BigEndian.PutUint32(b[flagsOff:], h.Flags)
	sealBlock(b)
	return b
}

// checkCreator refuses a creator that does not fit the header's 31 bytes.
func checkCreator(s string) error {
	if len(s) > creatorLen-1 {
		return fmt.Errorf("redo log creator %q is %d bytes, at most %d fit", s, len(s), creatorLen-1)
	}
	return nil
}

// ParseCheckpoint returns the checkpoint LSN of a checkpoint block (the first 512
// bytes of b); 0 for a block that holds none (all zero but its checksum).
func ParseCheckpoint(b []byte) (uint64, error) {
	if len(b) < BlockSize {
		return 0, fmt.Errorf("%w: checkpoint block of %d bytes, need %d", ErrCorrupt, len(b), BlockSize)
	}
	if !crcOK(b[:BlockSize]) {
		return 0, fmt.Errorf("%w: checkpoint block checksum mismatch", ErrCorrupt)
	}
	return binary.BigEndian.Uint64(b[checkpointLSN:]), nil
}

// checkpointBlock encodes a checkpoint block for lsn.
func checkpointBlock(lsn uint64) []byte {
	b := make([]byte, BlockSize)
	binary.BigEndian.PutUint64(b[checkpointLSN:], lsn)
	sealBlock(b)
	return b
}

// headerCheckpoint returns the newer valid checkpoint of a 2048-byte file header
// that lies in [start, end], or 0.
func headerCheckpoint(head []byte, start, end uint64) uint64 {
	var best uint64
	for _, off := range []int{checkpoint1, checkpoint2} {
		lsn, err := ParseCheckpoint(head[off:])
		if err == nil && lsn >= start && lsn <= end && lsn > best {
			best = lsn
		}
	}
	return best
}

// FileHeader builds the 2048-byte header of a redo file or backup log: h's block,
// both checkpoint blocks at checkpoint and a zero encryption header.
func FileHeader(h Header, checkpoint uint64) []byte {
	b := make([]byte, 0, HeaderSize)
	b = append(b, h.Block()...)
	b = append(b, checkpointBlock(checkpoint)...)
	b = append(b, make([]byte, BlockSize)...)
	return append(b, checkpointBlock(checkpoint)...)
}
