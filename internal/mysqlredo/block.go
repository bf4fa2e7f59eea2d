package mysqlredo

import (
	"encoding/binary"
	"fmt"
)

// blockKind classifies a 512-byte block read where the block of some LSN should be.
type blockKind int

const (
	blockValid blockKind = iota // the block of that LSN, checksum and header valid
	blockStale                  // a valid block of an older LSN, left in a recycled file
	blockAhead                  // a valid block of a newer LSN: the file was reused
	blockBad                    // checksum mismatch, zeros or an impossible header
)

// blockInfo is what inspectBlock learnt about a block.
type blockInfo struct {
	kind     blockKind
	dataLen  int  // bytes used, header included; BlockSize when full
	firstRec int  // offset of the first mini-transaction starting in the block, 0 if none
	noCRC    bool // the checksum field holds 0xDEADBEEF (innodb_log_checksums=OFF)
	number   uint64
	reason   string // why the block is not valid
}

// blockNumber is the position of the block holding lsn: lsn/512.
func blockNumber(lsn uint64) uint64 { return lsn / BlockSize }

// blockHeader returns the hdr_no and epoch_no of the block starting at lsn.
func blockHeader(lsn uint64) (hdrNo, epochNo uint32) {
	n := blockNumber(lsn)
	return uint32(1 + n%maxHdrNo), uint32(1 + n/maxHdrNo)
}

// storedNumber decodes the block number a block's hdr_no and epoch_no give, or
// false for numbers no writer produces (zero, hdr_no beyond 2^30).
func storedNumber(b []byte) (uint64, bool) {
	hdr := binary.BigEndian.Uint32(b) &^ flushBit
	epoch := binary.BigEndian.Uint32(b[8:])
	if hdr == 0 || hdr > maxHdrNo || epoch == 0 {
		return 0, false
	}
	return uint64(epoch-1)*maxHdrNo + uint64(hdr-1), true
}

// inspectBlock classifies b, the 512 bytes read where the block starting at lsn
// should be. Its only error is ErrEncrypted, for the block of lsn written encrypted.
func inspectBlock(b []byte, lsn uint64) (blockInfo, error) {
	want := blockNumber(lsn)
	num, ok := storedNumber(b)
	rawLen := binary.BigEndian.Uint16(b[4:])
	info := blockInfo{kind: blockBad, number: num, dataLen: int(rawLen &^ encryptedBit),
		firstRec: int(binary.BigEndian.Uint16(b[6:]))}
	if ok && num == want && rawLen&encryptedBit != 0 {
		return info, fmt.Errorf("block at LSN %d: %w", lsn, ErrEncrypted)
	}
	stored := binary.BigEndian.Uint32(b[blockCRCOff:])
	info.noCRC = stored == noChecksum
	switch {
	case !info.noCRC && stored != crc32c(b[:blockCRCOff]):
		info.reason = fmt.Sprintf("checksum mismatch (stored %#08x, computed %#08x)", stored, crc32c(b[:blockCRCOff]))
	case !ok:
		info.reason = "no valid block number (hdr_no/epoch_no)"
	case num < want:
		info.kind, info.reason = blockStale, fmt.Sprintf("an older block (LSN %d) left in a recycled file", num*BlockSize)
	case num > want:
		info.kind, info.reason = blockAhead, fmt.Sprintf("a newer block (LSN %d): the file was reused", num*BlockSize)
	default:
		info.reason = checkLengths(info.dataLen, info.firstRec)
		if info.reason == "" {
			info.kind = blockValid
		}
	}
	return info, nil
}

// checkLengths returns why a block's data_len or first_rec_group is impossible, or "".
func checkLengths(dataLen, firstRec int) string {
	if dataLen < blockHdrSize || dataLen > BlockSize {
		return fmt.Sprintf("data_len %d outside [%d, %d]", dataLen, blockHdrSize, BlockSize)
	}
	if firstRec != 0 && (firstRec < blockHdrSize || firstRec > blockCRCOff) {
		return fmt.Sprintf("first_rec_group %d outside [%d, %d]", firstRec, blockHdrSize, blockCRCOff)
	}
	return ""
}

// CheckBlock validates b as the block starting at lsn (a multiple of 512): its
// hdr_no and epoch_no match lsn, its checksum is the CRC-32C of its first 508 bytes
// (or 0xDEADBEEF, written with innodb_log_checksums=OFF), data_len and
// first_rec_group are in range, and it is not encrypted. It returns data_len, the
// bytes used including the 12-byte header (512 for a full block).
func CheckBlock(b []byte, lsn uint64) (int, error) {
	if len(b) < BlockSize {
		return 0, fmt.Errorf("%w: block at LSN %d is %d bytes long", ErrCorrupt, lsn, len(b))
	}
	if lsn%BlockSize != 0 {
		return 0, fmt.Errorf("block LSN %d is not a multiple of %d", lsn, BlockSize)
	}
	info, err := inspectBlock(b[:BlockSize], lsn)
	if err != nil {
		return 0, err
	}
	if info.kind != blockValid {
		return 0, fmt.Errorf("%w: block at LSN %d: %s", ErrCorrupt, lsn, info.reason)
	}
	return info.dataLen, nil
}

// emptyBlock builds the block starting at lsn holding no data (data_len 12).
func emptyBlock(lsn uint64) []byte {
	b := make([]byte, BlockSize)
	hdr, epoch := blockHeader(lsn)
	binary.BigEndian.PutUint32(b, hdr)
	binary.BigEndian.PutUint16(b[4:], blockHdrSize)
	binary.BigEndian.PutUint32(b[8:], epoch)
	sealBlock(b)
	return b
}

// cutBlock makes b (a valid block) end at offset end (12..508): data_len = end, a
// first_rec_group at or past end cleared (no mini-transaction starts in what is
// kept), the bytes after end zeroed and the CRC-32C recomputed.
func cutBlock(b []byte, end int) {
	binary.BigEndian.PutUint16(b[4:], uint16(end))
	if int(binary.BigEndian.Uint16(b[6:])) >= end {
		binary.BigEndian.PutUint16(b[6:], 0)
	}
	clear(b[end:blockCRCOff])
	sealBlock(b)
}

// validDataLSN refuses an LSN that cannot end a copy: inside a block header or trailer.
func validDataLSN(lsn uint64) error {
	if off := lsn % BlockSize; off < blockHdrSize || off >= blockCRCOff {
		return fmt.Errorf("LSN %d is not a data position (offset %d in its block, want [%d, %d))", lsn, off, blockHdrSize, blockCRCOff)
	}
	return nil
}
