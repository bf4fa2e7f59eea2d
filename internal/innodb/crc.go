package innodb

import (
	"hash/adler32"
	"hash/crc32"
)

// castagnoli is the CRC-32C table; hash/crc32 uses SSE4.2/ARMv8 instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// legacyCRC32 is buf_calc_page_crc32 (buf0checksum.cc): CRC-32C of bytes 4..25 XOR
// CRC-32C of bytes 38..ps-9, skipping the checksum, the flush-LSN/key-version field
// and the trailer.
func legacyCRC32(page []byte) uint32 {
	return crc32c(page[offPageNo:offKeyVersion]) ^ crc32c(page[offData:len(page)-trailerLen])
}

// zipCRC32 is page_zip_calc_checksum with use_adler=false (page0zip.cc): three CRC-32C
// over bytes 4..15, 24..25 and 34..end, XORed.
func zipCRC32(page []byte) uint32 {
	return crc32c(page[offPageNo:offLSN]) ^ crc32c(page[offType:offType+2]) ^
		crc32c(page[offSpaceID:])
}

// zipAdler32 is page_zip_calc_checksum with use_adler=true (the old "innodb"
// algorithm for ROW_FORMAT=COMPRESSED pages): Adler-32 over the same ranges.
func zipAdler32(page []byte) uint32 {
	a := adler32.New()
	a.Write(page[offPageNo:offLSN])
	a.Write(page[offType : offType+2])
	a.Write(page[offSpaceID:])
	return a.Sum32()
}
