package innodb

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// SpaceHeader is what a copier needs from page 0 of a tablespace file.
type SpaceHeader struct {
	SpaceID   uint32     // FSP_SPACE_ID
	SizePages uint32     // FSP_SIZE: the tablespace size in pages when page 0 was written
	Flags     SpaceFlags // FSP_SPACE_FLAGS
	// CryptData is set when page 0 carries encryption metadata (CRYPT_MAGIC); the
	// server then treats legacy-format pages with a nonzero key version as encrypted.
	CryptData bool
	// Flavor is the server that wrote the file. ParseSpaceHeader sets FlavorMySQL
	// when the flags show it (SpaceFlags.MySQL); a caller copying a MySQL server's
	// files should set it on every header, since MySQL undo tablespaces have flags
	// MariaDB could have written.
	Flavor Flavor
}

// cryptMagic starts the encryption metadata on page 0 (fil0crypt.cc CRYPT_MAGIC).
var cryptMagic = []byte{0x73, 0x0E, 0x0C, 0x52, 0x45, 0x74}

// ParseSpaceHeader decodes page 0 of a tablespace file; page0 must hold at least the
// FSP header and may be longer than one page.
func ParseSpaceHeader(page0 []byte) (SpaceHeader, error) {
	if len(page0) < offFSPFlags+4 {
		return SpaceHeader{}, fmt.Errorf("innodb: page 0 too short (%d bytes)", len(page0))
	}
	if n := PageNo(page0); n != 0 {
		return SpaceHeader{}, fmt.Errorf("innodb: page 0 claims to be page %d", n)
	}
	h := SpaceHeader{
		SpaceID:   binary.BigEndian.Uint32(page0[offData:]),
		SizePages: binary.BigEndian.Uint32(page0[offFSPSize:]),
		Flags:     SpaceFlags(binary.BigEndian.Uint32(page0[offFSPFlags:])),
	}
	if h.Flags.PageSize() == 0 {
		return SpaceHeader{}, fmt.Errorf("innodb: space %d: invalid FSP_SPACE_FLAGS %#x", h.SpaceID, uint32(h.Flags))
	}
	if h.Flags.MySQL() {
		h.Flavor = FlavorMySQL
	}
	if off := cryptOffset(h.Flags); len(page0) >= off+len(cryptMagic) {
		h.CryptData = bytes.Equal(page0[off:off+len(cryptMagic)], cryptMagic)
	}
	return h, nil
}

// extentPages is FSP_EXTENT_SIZE: 1 MiB of pages up to 16 KiB pages, else 64 pages.
func extentPages(pageSize int) int {
	if pageSize <= pageSizeOrig {
		return (1 << 20) / pageSize
	}
	return 64
}

// cryptOffset is where the encryption metadata sits on page 0: after the FIL and FSP
// headers and the extent descriptors of the first page (fsp_header_get_encryption_offset;
// 10428 for 16 KiB pages, as observed on 10.11).
func cryptOffset(f SpaceFlags) int {
	ext := extentPages(f.PageSize())
	xdesSize := 24 + (2*ext+7)/8        // XDES_BITMAP + 2 bits per page
	const xdesArrOffset = offData + 112 // FSP header is 112 bytes
	return offData + xdesArrOffset + xdesSize*f.PhysicalSize()/ext
}
