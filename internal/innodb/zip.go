package innodb

// checkZip validates a ROW_FORMAT=COMPRESSED page (page_zip_verify_checksum,
// page0zip.cc). Bytes 0..3 hold page_zip_calc_checksum: the crc32 variant, or in
// non-strict mode the Adler-32 ("innodb") variant or "none". A page with zero checksum
// and zero LSN is valid only if it is all zero. There is no LSN trailer.
func (c *Checker) checkZip(page []byte, pageNo uint32) string {
	if c.encrypted(page, pageNo) {
		return checkEncrypted(page, len(page))
	}
	stored := be32(page, offChecksum)
	if stored == 0 && PageLSN(page) == 0 {
		if IsZero(page) {
			return ""
		}
		return "nonzero page with zero checksum and LSN"
	}
	if stored == zipCRC32(page) || stored == noChecksum || stored == zipAdler32(page) {
		return ""
	}
	return "compressed page checksum mismatch"
}
