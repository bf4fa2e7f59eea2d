package innodb

// checkFullCRC32 follows the full_crc32 branch of buf_page_is_corrupted (buf0buf.cc).
// The last 4 bytes of the payload hold CRC-32C of everything before them. The payload
// is the whole page, or for a page_compressed page (bit 15 of FIL_PAGE_TYPE) the first
// (type & 0x7FFF) << 8 bytes. Unless the page is compressed or encrypted (nonzero key
// version in bytes 0..3), the 4 bytes before the CRC repeat the low half of the LSN.
func (c *Checker) checkFullCRC32(page []byte, _ uint32) string {
	size := len(page)
	t := PageType(page)
	compressed := t&fcrc32CompressedBit != 0
	if compressed {
		size = int(t&^fcrc32CompressedBit) << 8
		if size >= len(page) || size < offData+trailerLen {
			return "page_compressed payload size out of range"
		}
	}
	stored := be32(page, size-4)
	if stored == 0 && !compressed && IsZero(page) {
		return ""
	}
	if crc32c(page[:size-4]) != stored {
		return "full_crc32 checksum mismatch"
	}
	if !compressed && be32(page, offChecksum) == 0 && be32(page, offLSN+4) != be32(page, size-8) {
		return "LSN in header and trailer differ"
	}
	return ""
}
