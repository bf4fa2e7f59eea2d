package innodb

import (
	"strings"
	"testing"
)

func TestParseSpaceHeader(t *testing.T) {
	for _, f := range fixtures {
		h, err := ParseSpaceHeader(load(t, f.name+".after.gz"))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		fl := h.Flags
		if h.SpaceID == 0 || h.SizePages < 4 {
			t.Errorf("%s: space %d size %d", f.name, h.SpaceID, h.SizePages)
		}
		if (h.Flavor == FlavorMySQL) != f.mysql || fl.MySQLEncrypted() {
			t.Errorf("%s: flags %#x: flavor %v, MySQL encrypted %v", f.name, uint32(fl), h.Flavor, fl.MySQLEncrypted())
		}
		if fl.FullCRC32() != f.fullCRC32 || fl.PageCompressed() != f.pcomp || h.CryptData != f.crypt {
			t.Errorf("%s: flags %#x: fullcrc32=%v pcomp=%v crypt=%v", f.name, uint32(fl), fl.FullCRC32(), fl.PageCompressed(), h.CryptData)
		}
		if fl.PageSize() != 16384 || fl.PhysicalSize() != f.pageSize || (fl.ZipSize() != 0) != f.zip {
			t.Errorf("%s: flags %#x: page %d physical %d zip %d", f.name, uint32(fl), fl.PageSize(), fl.PhysicalSize(), fl.ZipSize())
		}
	}
}

func TestParseSpaceHeaderSystem(t *testing.T) {
	h, err := ParseSpaceHeader(load(t, "ibdata1.pages.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if h.SpaceID != 0 || !h.Flags.FullCRC32() || h.Flags.PhysicalSize() != 16384 || h.CryptData {
		t.Errorf("ibdata1: %+v", h)
	}
}

func TestParseSpaceHeaderErrors(t *testing.T) {
	page := append([]byte(nil), load(t, "fcrc32.after.gz")[:16384]...)
	if _, err := ParseSpaceHeader(page[:40]); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short page 0: %v", err)
	}
	bad := append([]byte(nil), page...)
	bad[offFSPFlags+3] = 0x1F // full_crc32 with page ssize 15
	if _, err := ParseSpaceHeader(bad); err == nil {
		t.Error("invalid flags accepted")
	}
	bad = append([]byte(nil), page...)
	bad[offPageNo+3] = 1
	if _, err := ParseSpaceHeader(bad); err == nil {
		t.Error("page 1 accepted as page 0")
	}
}

func TestSpaceFlagsSizes(t *testing.T) {
	cases := []struct {
		f              SpaceFlags
		page, phys, zs int
	}{
		{0, 16384, 16384, 0},      // legacy, old system tablespace
		{0x15, 16384, 16384, 0},   // full_crc32 16K
		{0x13, 4096, 4096, 0},     // full_crc32 4K
		{0x17, 65536, 65536, 0},   // full_crc32 64K
		{0x21, 16384, 16384, 0},   // legacy dynamic
		{0x29, 16384, 8192, 8192}, // legacy KEY_BLOCK_SIZE=8
		{0x23, 16384, 1024, 1024}, // legacy KEY_BLOCK_SIZE=1
		{0xE1, 4096, 4096, 0},     // legacy 4K page (ssize 3)
		{0x141, 0, 0, 0},          // legacy ssize 5 is invalid
		{0x10, 0, 0, 0},           // full_crc32 ssize 0 is invalid
	}
	for _, c := range cases {
		if c.f.PageSize() != c.page || c.f.PhysicalSize() != c.phys || c.f.ZipSize() != c.zs {
			t.Errorf("%#x: page %d phys %d zip %d", uint32(c.f), c.f.PageSize(), c.f.PhysicalSize(), c.f.ZipSize())
		}
	}
}
