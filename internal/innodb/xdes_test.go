package innodb

import (
	"encoding/binary"
	"slices"
	"testing"
)

// TestPageFreeFixtures reads the extent descriptors of tables a real server made: a
// new table uses pages 0..3 (FSP_HDR, IBUF_BITMAP, INODE, its root) of its first
// extent, the rest of the extent is free by its bits and the pages from the free limit
// (64) on are free by the limit. The system tablespace uses its first pages.
func TestPageFreeFixtures(t *testing.T) {
	for _, f := range []struct {
		name string
		ps   int
	}{{"fcrc32.after.gz", 16384}, {"crc32.after.gz", 16384}, {"zip.after.gz", 8192}, {"ibdata1.pages.gz", 16384}} {
		b := load(t, f.name)
		h, err := ParseSpaceHeader(b)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		limit := FreeLimit(b)
		var free []uint32
		for no := uint32(0); no < 70; no++ {
			if PageFree(b[:f.ps], h.Flags, limit, no) {
				free = append(free, no)
			}
		}
		if f.name == "ibdata1.pages.gz" {
			if limit <= 64 || len(free) == 70 || slices.Contains(free, 0) || slices.Contains(free, 5) {
				t.Errorf("%s: free limit %d, free pages among 0..69 %v: want pages 0..7 in use", f.name, limit, free)
			}
			continue
		}
		if limit != 64 || len(free) != 66 || free[0] != 4 {
			t.Errorf("%s: free limit %d, free pages among 0..69 %v: want 4..69 (limit 64)", f.name, limit, free)
		}
		if DescriptorPage(h.Flags, 70) != 0 || DescriptorPage(h.Flags, uint32(f.ps)+3) != uint32(f.ps) {
			t.Errorf("%s: descriptor pages of 70 and %d are %d and %d", f.name, f.ps+3, DescriptorPage(h.Flags, 70), DescriptorPage(h.Flags, uint32(f.ps)+3))
		}
	}
}

// TestPageFreeStates: a segment's extent uses its bits; a wholly free extent frees every
// page whatever its bits; an entry in no known state (a damaged or foreign page)
// frees nothing.
func TestPageFreeStates(t *testing.T) {
	b := load(t, "fcrc32.after.gz")
	h, _ := ParseSpaceHeader(b)
	desc := slices.Clone(b[:16384])
	second := offXDESArray + xdesBitmap + 16 // the entry of pages 64..127
	binary.BigEndian.PutUint32(desc[offFreeLimit:], 256)
	binary.BigEndian.PutUint32(desc[second+xdesState:], xdesFSEG)
	desc[second+xdesBitmap] = 0b0100 // page 65 free, 64 and 66.. in use
	for no, want := range map[uint32]bool{64: false, 65: true, 66: false, 2: false, 256: true} {
		if got := PageFree(desc, h.Flags, 256, no); got != want {
			t.Errorf("FSEG extent: page %d free %v, want %v", no, got, want)
		}
	}
	binary.BigEndian.PutUint32(desc[second+xdesState:], xdesFreeState)
	if !PageFree(desc, h.Flags, 256, 66) {
		t.Error("a page of a wholly free extent is not free")
	}
	binary.BigEndian.PutUint32(desc[second+xdesState:], 77)
	if PageFree(desc, h.Flags, 256, 65) {
		t.Error("an entry in an unknown state marks its page free")
	}
	if PageFree(desc[:100], h.Flags, 256, 65) {
		t.Error("a short descriptor page marks a page free")
	}
}
