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
// algorithm for ROW_FORMAT=COMPRESSED pages): Adler-32 over the same ranges, started
// from 0 as the server's adler32(0L, ...) call does, not from Adler-32's usual 1.
func zipAdler32(page []byte) uint32 {
	a := adler32.New()
	a.Write(page[offPageNo:offLSN])
	a.Write(page[offType : offType+2])
	a.Write(page[offSpaceID:])
	return adlerFromZero(a.Sum32(), len(page)-offSpaceID+offLSN-offPageNo+2)
}

// adlerFromZero turns the Adler-32 sum of n bytes (started from 1) into the sum
// started from 0: the low half (1 + the byte sum) loses the 1, and the high half (the
// sum of the n running low halves) loses n.
func adlerFromZero(sum uint32, n int) uint32 {
	const mod = 65521
	lo := (sum&0xFFFF + mod - 1) % mod
	hi := (sum>>16 + mod - uint32(n%mod)) % mod
	return hi<<16 | lo
}
