package innodb

// checkLegacy validates a page of a tablespace in the pre-full_crc32 format that is not
// ROW_FORMAT=COMPRESSED. Encrypted pages are checked by their post-encryption checksum
// and page_compressed pages by their header, as mariabackup does without
// --extended-validation; other pages as buf_page_is_corrupted does.
func (c *Checker) checkLegacy(page []byte, pageNo uint32) string {
	if c.encrypted(page, pageNo) {
		return checkEncrypted(page, 0)
	}
	if t := PageType(page); c.flags.PageCompressed() && (t == typePageCompressed || t == typePageCompressedEncrypted) {
		return checkLegacyCompressed(page)
	}
	if be32(page, offLSN+4) != be32(page, len(page)-4) {
		return "LSN in header and trailer differ"
	}
	return legacyChecksum(page)
}

// encrypted reports whether a legacy-format page is encrypted: the server decrypts a
// page when the tablespace has encryption metadata and the page has a key version.
// Page 0 is never encrypted (in ibdata1 bytes 26..33 hold the flushed LSN).
func (c *Checker) encrypted(page []byte, pageNo uint32) bool {
	return c.crypt && pageNo != 0 && be32(page, offKeyVersion) != 0
}

// legacyChecksum is the non-strict checksum test of buf_page_is_corrupted: field 1
// (bytes 0..3) and field 2 (ps-8..ps-5) must both hold the crc32 checksum, or field 1
// the "innodb" fold checksum and field 2 the old fold checksum; "none" (0xDEADBEEF)
// and all-zero pages (ignoring bytes 26..33) are accepted.
func legacyChecksum(page []byte) string {
	f1, f2 := be32(page, offChecksum), be32(page, len(page)-trailerLen)
	if f1 == 0 && f2 == 0 && IsZero(page[:offKeyVersion]) && IsZero(page[offSpaceID:]) {
		return ""
	}
	if f1 == noChecksum && f2 == noChecksum {
		return ""
	}
	crc := legacyCRC32(page)
	if f1 == crc && f2 == crc {
		return ""
	}
	// Very old InnoDB stored the high half of the LSN in field 2.
	if f2 != be32(page, offLSN) && f2 != noChecksum && f2 != foldOldChecksum(page) {
		return "checksum mismatch (trailer)"
	}
	if f1 == 0 || f1 == noChecksum || f1 == foldNewChecksum(page) {
		return ""
	}
	return "checksum mismatch"
}
