package innodb

import "encoding/binary"

// Extent descriptors (fsp0fsp.h). Page 0 (FSP_HDR) and every page whose number is a
// multiple of the physical page size (XDES) describe the PhysicalSize() pages that
// start with them: one entry per extent of FSP_EXTENT_SIZE pages, each with two bits
// per page, the first of which (XDES_FREE_BIT) is set while the page is free.
const (
	offFreeLimit  = offData + 12  // FSP_HEADER_OFFSET + FSP_FREE_LIMIT
	offXDESArray  = offData + 112 // XDES_ARR_OFFSET: after the 112-byte FSP header
	xdesState     = 20            // XDES_STATE in an entry
	xdesBitmap    = 24            // XDES_BITMAP in an entry
	xdesFreeState = 1             // XDES_FREE: every page of the extent is free
	xdesFSEG      = 4             // XDES_FSEG, MariaDB's last state: FREE_FRAG, FULL_FRAG, FSEG use the bits
	xdesFSEGFrag  = 5             // XDES_FSEG_FRAG (MySQL 8.0): a fragment extent leased to a segment
)

// DescriptorPage is the page whose extent descriptors describe page no of a
// tablespace with flags f.
func DescriptorPage(f SpaceFlags, no uint32) uint32 {
	per := uint32(f.PhysicalSize())
	return no - no%per
}

// FreeLimit is FSP_FREE_LIMIT of a tablespace's page 0: the pages from it on were
// never initialized, whatever their descriptors hold. It is 0 if page0 is too short.
func FreeLimit(page0 []byte) uint32 {
	if len(page0) < offFreeLimit+4 {
		return 0
	}
	return binary.BigEndian.Uint32(page0[offFreeLimit:])
}

// PageFree tells whether page no of a tablespace with flags f and free limit limit
// (FreeLimit) is free: at or past the limit, in an extent that is wholly free, or
// with its XDES_FREE_BIT set in desc, its descriptor page (DescriptorPage). An entry
// in no known state, or a desc too short to hold it, marks nothing free. MySQL's
// XDES_FSEG_FRAG state is known when the flags are MySQL's (SpaceFlags.MySQL, so not
// in undo tablespaces).
func PageFree(desc []byte, f SpaceFlags, limit, no uint32) bool {
	if no >= limit {
		return true
	}
	ext := extentPages(f.PageSize())
	rel := int(no % uint32(f.PhysicalSize()))
	entry := offXDESArray + rel/ext*(xdesBitmap+(2*ext+7)/8)
	bit := 2 * (rel % ext) // XDES_FREE_BIT of the page
	if entry+xdesBitmap+bit/8 >= len(desc) {
		return false
	}
	switch state := binary.BigEndian.Uint32(desc[entry+xdesState:]); {
	case state == xdesFreeState:
		return true
	case state > xdesFreeState && state <= xdesFSEG, state == xdesFSEGFrag && f.MySQL():
		return desc[entry+xdesBitmap+bit/8]>>(bit%8)&1 == 1
	}
	return false
}
