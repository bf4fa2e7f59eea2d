package innodb

// checkEncrypted validates a legacy-format encrypted page by the checksum the server
// stores after encryption in bytes 30..33 (fil_space_verify_crypt_checksum,
// fil0crypt.cc): crc32 (buf_calc_page_crc32, or page_zip_calc_checksum for a
// ROW_FORMAT=COMPRESSED page of zipSize bytes) of the encrypted image, or in non-strict
// mode "none" or the "innodb" variant. Encrypted page_compressed pages have no such
// checksum; their header is checked instead. The trailer of an uncompressed page is
// not encrypted, so the LSN test of unencrypted pages applies too (an addition to the
// server's test that catches more torn pages).
func checkEncrypted(page []byte, zipSize int) string {
	if PageType(page) == typePageCompressedEncrypted {
		return checkLegacyCompressed(page)
	}
	if zipSize == 0 && be32(page, offLSN+4) != be32(page, len(page)-4) {
		return "LSN in header and trailer differ"
	}
	sum := be32(page, offCryptSum)
	switch {
	case sum == noChecksum:
		return ""
	case zipSize != 0 && (sum == zipCRC32(page) || sum == zipAdler32(page)):
		return ""
	case zipSize == 0 && (sum == legacyCRC32(page) || sum == foldNewChecksum(page)):
		return ""
	}
	return "post-encryption checksum mismatch"
}
