package restore

import (
	"encoding/binary"
	"github.com/ferry-backup/ferry/internal/delta"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// TestCheckLink: a chain starts with a full backup not prepared by ferry, each link
// is an incremental whose from_lsn is the previous link's to_lsn (and, between ferry
// backups, names it as its base).
func TestCheckLink(t *testing.T) {
	full := &Backup{Dir: "full", Manifest: &manifest.Manifest{ID: "f", Type: manifest.TypeFull, EndLSN: 500}}
	inc := func(id, base string, from, to uint64) *Backup {
		return &Backup{Dir: id, Manifest: &manifest.Manifest{ID: id, Type: manifest.TypeIncremental, EndLSN: to,
			Incremental: &manifest.Incremental{BaseID: base, BaseToLSN: from}}}
	}
	mbInc := &Backup{Dir: "mb", Incremental: true, Checkpoints: xtrabackup.Checkpoints{BackupType: xtrabackup.TypeIncremental, FromLSN: 800, ToLSN: 900}}
	prepared := &Backup{Dir: "p", Prepared: true, Manifest: &manifest.Manifest{ID: "p", Type: manifest.TypeFull, Prepared: &manifest.Prepared{}}}
	i1, i2 := inc("i1", "f", 500, 800), inc("i2", "i1", 800, 900)
	cases := []struct {
		i          int
		prev, b    *Backup
		wantSubstr string
	}{
		{0, nil, full, ""},
		{1, full, i1, ""},
		{2, i1, i2, ""},
		{2, i1, mbInc, ""},
		{0, nil, i1, "must be a full backup"},
		{0, nil, prepared, "prepared by ferry prepare"},
		{1, full, i2, "the chain is broken"},
		{1, i1, full, "is a full backup, not an incremental"},
		{2, i1, inc("x", "other", 800, 900), "was taken on backup other"},
	}
	for _, c := range cases {
		err := checkLink(c.i, c.prev, c.b)
		if c.wantSubstr == "" && err != nil || c.wantSubstr != "" && (err == nil || !strings.Contains(err.Error(), c.wantSubstr)) {
			t.Errorf("link %d %s after %v: %v, want %q", c.i, c.b.Dir, c.prev, err, c.wantSubstr)
		}
	}
}

// TestSegmentLeave: the full backup's copy leaves out exactly the pages a link of the
// segment writes, never page 0, and only in the tablespace they belong to; a segment
// that remembers nothing, and a file that is no tablespace, leave nothing out.
func TestSegmentLeave(t *testing.T) {
	page0 := func(space uint32) []byte {
		p := make([]byte, 16384)
		binary.BigEndian.PutUint32(p[34:], space)   // FIL_PAGE_SPACE_ID
		binary.BigEndian.PutUint32(p[38:], space)   // FSP_SPACE_ID
		binary.BigEndian.PutUint32(p[38+16:], 0x15) // FSP_SPACE_FLAGS: full_crc32, 16 KiB pages
		return p
	}
	s := &segment{last: map[delta.PageKey]int{
		{Space: 7, Page: 0}: 1, {Space: 7, Page: 3}: 1, {Space: 7, Page: 9}: 2, {Space: 8, Page: 4}: 1,
		{Space: 0, File: "ibdata1", Page: 5}: 1,
	}}
	size, left := s.leave()(page0(7))
	if size != 16384 || left == nil {
		t.Fatalf("space 7: page size %d, leave %v; want 16384 and a test", size, left != nil)
	}
	for p, want := range map[uint32]bool{0: false, 1: false, 3: true, 4: false, 9: true} {
		if left(p) != want {
			t.Errorf("space 7 page %d left out: %v, want %v", p, left(p), want)
		}
	}
	if size, _ := s.leave()(page0(0)); size != 0 {
		t.Error("the system tablespace must be copied whole")
	}
	if size, _ := s.leave()([]byte("Phys\x00\x00\x00\x00 not a tablespace")); size != 0 {
		t.Error("a file that is no tablespace must be copied whole")
	}
	if (&segment{}).leave() != nil || (*segment)(nil).leave() != nil {
		t.Error("a segment that remembers no page must leave nothing out")
	}
}
