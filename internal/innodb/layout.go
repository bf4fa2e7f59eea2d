package innodb

// Byte offsets in the FIL page header and FSP header (fil0fil.h, fsp0fsp.h).
const (
	offChecksum   = 0  // FIL_PAGE_SPACE_OR_CHKSUM; key version in full_crc32
	offPageNo     = 4  // FIL_PAGE_OFFSET
	offLSN        = 16 // FIL_PAGE_LSN (8 bytes)
	offType       = 24 // FIL_PAGE_TYPE (2 bytes)
	offKeyVersion = 26 // FIL_PAGE_FILE_FLUSH_LSN_OR_KEY_VERSION (legacy)
	offCryptSum   = 30 // legacy post-encryption checksum
	offSpaceID    = 34 // FIL_PAGE_SPACE_ID
	offData       = 38 // FIL_PAGE_DATA, also the FSP header on page 0
	offFSPSize    = offData + 8
	offFSPFlags   = offData + 16
	trailerLen    = 8 // FIL_PAGE_END_LSN_OLD_CHKSUM
)

// Page types that change how a page is validated.
const (
	typePageCompressed          = 34354   // FIL_PAGE_PAGE_COMPRESSED (legacy)
	typePageCompressedEncrypted = 37401   // FIL_PAGE_PAGE_COMPRESSED_ENCRYPTED (legacy)
	fcrc32CompressedBit         = 1 << 15 // FIL_PAGE_COMPRESS_FCRC32_MARKER in FIL_PAGE_TYPE
)

// noChecksum is BUF_NO_CHECKSUM_MAGIC, written by innodb_checksum_algorithm=none.
const noChecksum = 0xDEADBEEF
