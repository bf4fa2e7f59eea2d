package innodb

import "encoding/binary"

// PageLSN returns FIL_PAGE_LSN, the end LSN of the newest change applied to the page.
func PageLSN(page []byte) uint64 { return binary.BigEndian.Uint64(page[offLSN:]) }

// PageNo returns FIL_PAGE_OFFSET, the page number the page claims to be.
func PageNo(page []byte) uint32 { return binary.BigEndian.Uint32(page[offPageNo:]) }

// PageType returns FIL_PAGE_TYPE (for example 17855 for a B-tree page).
func PageType(page []byte) uint16 { return binary.BigEndian.Uint16(page[offType:]) }

func be32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
