package innodb

// SpaceFlags is FSP_SPACE_FLAGS, stored on page 0 at byte 54 (fsp0types.h). Two
// layouts exist: full_crc32 (bit 4 set; bits 0..3 page ssize, bits 5..7 page_compressed
// algorithm) and legacy (bit 0 post-antelope, bits 1..4 zip ssize, bit 5 atomic blobs,
// bits 6..9 page ssize with 0 meaning 16 KiB, bit 16 page_compressed).
type SpaceFlags uint32

const (
	fcrc32Marker        = 1 << 4
	legacyPageComp      = 1 << 16
	pageSizeOrig        = 16384 // UNIV_PAGE_SIZE_ORIG
	fcrc32SsizeMask     = 0xF
	legacySsizeShift    = 6
	legacyZipSsizeShift = 1
	fcrc32AlgoShift     = 5
)

// FullCRC32 reports whether the tablespace uses the innodb_checksum_algorithm=full_crc32
// page format.
func (f SpaceFlags) FullCRC32() bool { return f&fcrc32Marker != 0 }

// PageSize returns the logical page size (innodb_page_size), or 0 if the flags are
// invalid. In the legacy layout a page ssize of 0 means 16 KiB.
func (f SpaceFlags) PageSize() int {
	ssize := uint32(f>>legacySsizeShift) & 0xF
	if f.FullCRC32() {
		ssize = uint32(f) & fcrc32SsizeMask
		if ssize == 5 {
			return pageSizeOrig
		}
	} else if ssize == 0 {
		return pageSizeOrig
	}
	if ssize == 3 || ssize == 4 || ssize == 6 || ssize == 7 {
		return 512 << ssize
	}
	return 0
}

// ZipSize returns the ROW_FORMAT=COMPRESSED physical page size, 0 if the tablespace is
// not compressed that way (never in full_crc32 format).
func (f SpaceFlags) ZipSize() int {
	if f.FullCRC32() {
		return 0
	}
	if zs := uint32(f>>legacyZipSsizeShift) & 0xF; zs != 0 {
		return 512 << zs
	}
	return 0
}

// PhysicalSize returns the size of one page in the file: ZipSize if nonzero, else
// PageSize.
func (f SpaceFlags) PhysicalSize() int {
	if z := f.ZipSize(); z != 0 {
		return z
	}
	return f.PageSize()
}

// PageCompressed reports whether the tablespace is PAGE_COMPRESSED=1 (pages may be
// stored compressed, the rest of the page trimmed by hole punching).
func (f SpaceFlags) PageCompressed() bool {
	if f.FullCRC32() {
		return (uint32(f)>>fcrc32AlgoShift)&7 != 0
	}
	return f&legacyPageComp != 0
}
