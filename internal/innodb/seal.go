package innodb

import "encoding/binary"

// Page types the legacy write path keeps on 16 KiB pages (buf_flush_init_for_writing);
// any other type is reset.
var keptTypes = map[uint16]bool{
	17855: true, 18: true, 17854: true, // INDEX, INSTANT, RTREE
	2: true, 3: true, 4: true, 0: true, 6: true, 7: true, // UNDO_LOG, INODE, IBUF_FREE_LIST, ALLOCATED, SYS, TRX_SYS
	10: true, 11: true, 12: true, // BLOB, ZBLOB, ZBLOB2
}

// Page types the legacy write path sets (and typeFSPHdr, typeXDES of crypt.go).
const (
	typeIbufBitmap = 5
	typeTrxSys     = 7
	typeUnknown    = 13
)

// SealPage sets FIL_PAGE_LSN of an uncompressed, unencrypted page to lsn and fills
// the fields the server computes when it writes the page (buf_flush_init_for_writing):
// for full_crc32 the key version (cleared), the trailer's LSN and the CRC-32C; for the
// legacy format the trailer, the crc32 checksum and, on 16 KiB pages, a valid page
// type. page is one whole page of the tablespace with flags f.
func SealPage(page []byte, spaceID, pageNo uint32, f SpaceFlags, lsn uint64) {
	size := len(page)
	binary.BigEndian.PutUint64(page[offLSN:], lsn)
	binary.BigEndian.PutUint64(page[size-trailerLen:], lsn)
	system := pageNo == 0 || (spaceID == 0 && pageNo == 5)
	if f.FullCRC32() {
		if !system {
			binary.BigEndian.PutUint32(page[offChecksum:], 0)
		}
		copy(page[size-8:size-4], page[offLSN+4:offLSN+8])
		binary.BigEndian.PutUint32(page[size-4:], crc32c(page[:size-4]))
		return
	}
	if size == pageSizeOrig {
		resetType(page, spaceID, pageNo)
	}
	if !system {
		clear(page[offKeyVersion:offSpaceID])
	}
	crc := legacyCRC32(page)
	binary.BigEndian.PutUint32(page[offChecksum:], crc)
	binary.BigEndian.PutUint32(page[size-trailerLen:], crc)
}

// resetType gives a legacy 16 KiB page with an invalid FIL_PAGE_TYPE the type the
// server writes ("Resetting invalid page type").
func resetType(page []byte, spaceID, pageNo uint32) {
	t := PageType(page)
	want := t
	switch {
	case pageNo%16384 == 0 && pageNo == 0:
		want = typeFSPHdr
	case pageNo%16384 == 0:
		want = typeXDES
	case pageNo%16384 == 1:
		want = typeIbufBitmap
	case spaceID == 0 && pageNo == 5:
		want = typeTrxSys
	case !keptTypes[t]:
		want = typeUnknown
	}
	binary.BigEndian.PutUint16(page[offType:], want)
}

// SealZipPage sets FIL_PAGE_LSN of a ROW_FORMAT=COMPRESSED page image to lsn and
// writes its crc32 checksum (page_zip_calc_checksum); bytes 26..33 are cleared except
// on page 0.
func SealZipPage(page []byte, pageNo uint32, lsn uint64) {
	binary.BigEndian.PutUint64(page[offLSN:], lsn)
	if pageNo != 0 {
		clear(page[offKeyVersion:offSpaceID])
	}
	binary.BigEndian.PutUint32(page[offChecksum:], zipCRC32(page))
}
