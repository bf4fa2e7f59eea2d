package innodb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// wantUnsupported fails unless err is an *UnsupportedPageError for pageNo and feature.
func wantUnsupported(t *testing.T, err error, pageNo uint32, feature Feature, what string) {
	t.Helper()
	var ue *UnsupportedPageError
	if !errors.As(err, &ue) || ue.PageNo != pageNo || ue.Feature != feature {
		t.Errorf("%s: got %v, want page %d using %v", what, err, pageNo, feature)
	}
}

// TestMySQLSystemPages checks the pages of MySQL's own tablespaces: the system
// tablespace, the data dictionary (mysql.ibd), an undo tablespace and a general
// tablespace. Only the undo tablespace's flags do not tell MySQL's.
func TestMySQLSystemPages(t *testing.T) {
	for _, f := range []struct {
		name   string
		n      int
		system bool
		flavor Flavor
	}{
		{"mysql_sys_ibdata1.pages.gz", 8, true, FlavorMySQL},
		{"mysql_sys_dd.pages.gz", 4, false, FlavorMySQL},
		{"mysql_sys_undo.pages.gz", 4, false, FlavorMariaDB},
		{"mysql_gts.pages.gz", 4, false, FlavorMySQL},
	} {
		b := load(t, f.name)
		h, err := ParseSpaceHeader(b)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if h.Flavor != f.flavor || h.Flags.PhysicalSize() != 16384 || h.Flags.MySQLEncrypted() {
			t.Errorf("%s: flags %#x: flavor %v, page size %d", f.name, uint32(h.Flags), h.Flavor, h.Flags.PhysicalSize())
		}
		h.Flavor = FlavorMySQL // as a caller copying a MySQL server sets it
		c := NewChecker(h, f.system)
		ps := pages(t, b, 16384)
		if len(ps) != f.n {
			t.Fatalf("%s: %d pages", f.name, len(ps))
		}
		for i, p := range ps {
			if err := c.Check(p, uint32(i)); err != nil {
				t.Errorf("%s: %v", f.name, err)
			}
			q := slices.Clone(p)
			for _, o := range legacyCovered {
				if o < 0 {
					o += len(q)
				}
				q[o] ^= 0x10
				wantCorrupt(t, c.Check(q, uint32(i)), uint32(i), fmt.Sprintf("%s page %d offset %d", f.name, i, o))
				q[o] ^= 0x10
			}
		}
	}
}

// TestMySQLPageCompressed: COMPRESSION='zlib' and 'lz4' tables store pages 1.. as
// type 14. The checker names the feature instead of calling them corrupt; a damaged
// header or a misplaced page is still corrupt, and a MariaDB checker (which never sees
// type 14) keeps calling them corrupt.
func TestMySQLPageCompressed(t *testing.T) {
	for _, algo := range []string{"zlib", "lz4"} {
		name := "mysql_pcomp_" + algo + ".pages.gz"
		ps, c := checkerFor(t, name, 16384, false)
		if err := c.Check(ps[0], 0); err != nil {
			t.Errorf("%s page 0: %v", name, err)
		}
		for i := 1; i < len(ps); i++ {
			err := c.Check(ps[i], uint32(i))
			wantUnsupported(t, err, uint32(i), FeatureMySQLPageCompression, name)
			var ue *UnsupportedPageError
			if errors.As(err, &ue) && ue.Detail != algo {
				t.Errorf("%s page %d: algorithm %q", name, i, ue.Detail)
			}
		}
		p := slices.Clone(ps[2])
		p[offMySQLCompAlgo] = 9
		wantCorrupt(t, c.Check(p, 2), 2, name+" unknown algorithm")
		p = slices.Clone(ps[2])
		binary.BigEndian.PutUint16(p[offMySQLCompSize:], 16384)
		wantCorrupt(t, c.Check(p, 2), 2, name+" compressed size")
		wantCorrupt(t, c.Check(ps[2], 3), 3, name+" wrong page number")

		h, _ := ParseSpaceHeader(ps[0])
		h.Flags &^= mysqlSDI
		h.Flavor = FlavorMariaDB
		wantCorrupt(t, NewChecker(h, false).Check(ps[2], 2), 2, name+" MariaDB checker")
	}
}

// encryptLike turns a valid page into what MySQL's keyring encryption stores: the
// header (bytes 0..37) in the clear with the page type replaced, the rest scrambled.
func encryptLike(page []byte, typ uint16) []byte {
	p := slices.Clone(page)
	binary.BigEndian.PutUint16(p[offMySQLCompAlgo+1:], PageType(p)) // FIL_PAGE_ORIGINAL_TYPE_V1
	binary.BigEndian.PutUint16(p[offType:], typ)
	for i := offData; i < len(p); i++ {
		p[i] ^= byte(i*7 + 1)
	}
	return p
}

// TestMySQLEncryptedPages: the test server has no keyring, so encrypted pages are
// made from real ones. Every page type of MySQL encryption is named, in plain and
// ROW_FORMAT=COMPRESSED tablespaces, and by an undo tablespace's checker only when the
// caller says the file is MySQL's.
func TestMySQLEncryptedPages(t *testing.T) {
	for _, f := range []struct {
		name string
		ps   int
	}{{"mysql_crc32.after.gz", 16384}, {"mysql_zip8.after.gz", 8192}, {"mysql_sys_undo.pages.gz", 16384}} {
		ps, c := checkerFor(t, f.name, f.ps, false)
		undo := f.name == "mysql_sys_undo.pages.gz"
		for _, typ := range []uint16{typeMySQLEncrypted, typeMySQLCompressedEncrypted, typeMySQLEncryptedRTree} {
			enc := encryptLike(ps[3], typ)
			if undo {
				wantCorrupt(t, c.Check(enc, 3), 3, "undo page, flavor unknown")
				h, _ := ParseSpaceHeader(ps[0])
				h.Flavor = FlavorMySQL
				wantUnsupported(t, NewChecker(h, false).Check(enc, 3), 3, FeatureMySQLEncryption, "undo page of a MySQL server")
				continue
			}
			wantUnsupported(t, c.Check(enc, 3), 3, FeatureMySQLEncryption, fmt.Sprintf("%s type %d", f.name, typ))
			wantCorrupt(t, c.Check(enc, 2), 2, "encrypted page at the wrong position")
		}
	}
}

func TestMySQLFlags(t *testing.T) {
	for _, c := range []struct {
		f              SpaceFlags
		mysql, enc     bool
		page, physical int
	}{
		{0x4021, true, false, 16384, 16384}, // file-per-table, DYNAMIC
		{0x6021, true, true, 16384, 16384},  // ENCRYPTION='Y'
		{0x4800, true, false, 16384, 16384}, // general tablespace, mysql.ibd, ibdata1
		{0x6800, true, true, 16384, 16384},  // encrypted general tablespace
		{0x2000, true, true, 16384, 16384},  // encrypted undo tablespace
		{0x4029, true, false, 16384, 8192},  // KEY_BLOCK_SIZE=8
		{0x40e1, true, false, 4096, 4096},   // innodb_page_size=4k
		{0x41e1, true, false, 65536, 65536}, // innodb_page_size=64k
		{0, false, false, 16384, 16384},     // undo tablespace, or MariaDB
		{0x15, false, false, 16384, 16384},  // MariaDB full_crc32
		{0x10021, false, false, 16384, 16384},
	} {
		if c.f.MySQL() != c.mysql || c.f.MySQLEncrypted() != c.enc || c.f.PageSize() != c.page || c.f.PhysicalSize() != c.physical {
			t.Errorf("%#x: MySQL %v encrypted %v page %d physical %d", uint32(c.f), c.f.MySQL(), c.f.MySQLEncrypted(), c.f.PageSize(), c.f.PhysicalSize())
		}
	}
	if FlavorMySQL.String() != "MySQL" || FlavorMariaDB.String() != "MariaDB" {
		t.Error("flavor names")
	}
	page0 := slices.Clone(load(t, "mysql_crc32.after.gz")[:16384])
	binary.BigEndian.PutUint32(page0[offFSPFlags:], 0x6021)
	if h, err := ParseSpaceHeader(page0); err != nil || !h.Flags.MySQLEncrypted() || h.Flavor != FlavorMySQL {
		t.Errorf("encrypted page 0: %+v, %v", h, err)
	}
}

func TestUnsupportedPageErrorText(t *testing.T) {
	e := &UnsupportedPageError{PageNo: 7, Feature: FeatureMySQLPageCompression, Detail: "lz4"}
	want := "innodb: page 7 uses MySQL transparent page compression (COMPRESSION='zlib'/'lz4') (lz4), which ferry cannot validate"
	if e.Error() != want {
		t.Errorf("got %q", e.Error())
	}
	e = &UnsupportedPageError{PageNo: 8, Feature: FeatureMySQLEncryption}
	if e.Error() != "innodb: page 8 uses MySQL tablespace encryption (ENCRYPTION='Y'), which ferry cannot validate" {
		t.Errorf("got %q", e.Error())
	}
}

// TestMySQLPageFreeLeasedExtent reads a 4 KiB-page tablespace (pages 0..3 and the
// descriptor page 12288) whose extent at 12288 a segment leased (XDES_FSEG_FRAG, MySQL
// 8.0 only) and whose rows on pages 12310..12459 were deleted: those pages are free,
// the rest of the extent is not; the next extent is wholly free and pages from the free
// limit (15616) on are free. Without MySQL's flags the leased state is unknown and
// frees nothing.
func TestMySQLPageFreeLeasedExtent(t *testing.T) {
	b := load(t, "mysql_xdes4k.pages.gz")
	h, err := ParseSpaceHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	ps := pages(t, b, 4096)
	desc, limit := ps[4], FreeLimit(b)
	if h.Flags.PageSize() != 4096 || limit != 15616 || PageNo(desc) != 12288 || DescriptorPage(h.Flags, 12300) != 12288 {
		t.Fatalf("flags %#x, free limit %d, descriptor page %d", uint32(h.Flags), limit, PageNo(desc))
	}
	var free []uint32
	for no := uint32(12288); no < 12288+256; no++ {
		if PageFree(desc, h.Flags, limit, no) {
			free = append(free, no)
		}
	}
	if len(free) != 150 || free[0] != 12310 || free[149] != 12459 {
		t.Errorf("leased extent: %d free pages, %v..", len(free), free[:min(len(free), 3)])
	}
	if !PageFree(desc, h.Flags, limit, 12544) || !PageFree(desc, h.Flags, limit, 15616) || PageFree(desc, h.Flags, limit, 12288+3*256+5) {
		t.Error("free extent, free limit or segment extent misread")
	}
	if PageFree(desc, h.Flags&^mysqlSDI, limit, 12310) {
		t.Error("XDES_FSEG_FRAG known without MySQL's flags")
	}
	// The first pages: FSP_HDR, IBUF_BITMAP, INODE, SDI root in use.
	for no := uint32(0); no < 4; no++ {
		if PageFree(ps[0], h.Flags, limit, no) {
			t.Errorf("page %d free", no)
		}
	}
	c := NewChecker(h, false)
	for i, p := range ps[:4] {
		if err := c.Check(p, uint32(i)); err != nil {
			t.Error(err)
		}
	}
	if err := c.Check(desc, 12288); err != nil {
		t.Error(err)
	}
}
