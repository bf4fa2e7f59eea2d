package innodb

import "encoding/binary"

// Compression algorithms of page_compressed pages (PAGE_ZLIB_ALGORITHM ..
// PAGE_SNAPPY_ALGORITHM).
const (
	minPageAlgo = 1
	maxPageAlgo = 6
)

// checkLegacyCompressed checks the header of a legacy page_compressed page. Such pages
// carry no checksum until decompressed (buf_page_is_corrupted accepts them), so this
// only applies the header tests of fil_page_decompress_for_non_full_crc32: checksum
// field "none", a known algorithm, a payload size that fits; for encrypted ones
// (37401, whose payload checksum is only known after decryption) a key version.
func checkLegacyCompressed(page []byte) string {
	if be32(page, offChecksum) != noChecksum {
		return "page_compressed page without checksum marker"
	}
	header, algo := offData+2, uint64(0)
	if PageType(page) == typePageCompressedEncrypted {
		header += 2
		algo = uint64(binary.BigEndian.Uint16(page[offData+2:]))
		if be32(page, offKeyVersion) == 0 {
			return "encrypted page_compressed page without key version"
		}
	} else {
		algo = binary.BigEndian.Uint64(page[offKeyVersion:])
	}
	if algo < minPageAlgo || algo > maxPageAlgo {
		return "page_compressed algorithm unknown"
	}
	if n := int(binary.BigEndian.Uint16(page[offData:])); n == 0 || n > len(page)-header {
		return "page_compressed payload size out of range"
	}
	return ""
}
