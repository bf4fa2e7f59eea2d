package backup

import (
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"golang.org/x/sys/unix"
)

// TestReplaced: a tablespace is the base's file only if its space id, flags, inode and
// birth time match and page 0 did not go back or shrink; a file new to the base, one
// the base recorded no identity for, and (without a base manifest) one whose page 0
// is at LSN 0 or whose space id the redo deletes or creates are copied whole.
func TestReplaced(t *testing.T) {
	id := func(inode uint64, birth int64, pages uint32, lsn uint64) *manifest.Identity {
		return &manifest.Identity{Inode: inode, BirthNS: birth, Pages: pages, LSN: lsn}
	}
	sp := func(space, flags uint32, i *manifest.Identity) manifest.Space {
		return manifest.Space{ID: space, Flags: flags, Identity: i}
	}
	base := map[uint32]manifest.Space{
		5: sp(5, 0x15, id(100, 1_000, 8, 5000)),
		6: sp(6, 0x15, nil),                  // an older ferry's base
		7: sp(7, 0x15, id(200, 0, 8, 5000)),  // no birth time on that filesystem
		8: sp(8, 0x15, id(300, 2_000, 8, 0)), // imported before the base, copied whole then
	}
	cases := []struct {
		name   string
		spaces map[uint32]manifest.Space
		now    manifest.Space
		ops    bool
		want   string // a part of the reason; "" for the base's file
	}{
		{"same file, written since", base, sp(5, 0x15, id(100, 1_000, 12, 9000)), false, ""},
		{"same file, untouched", base, sp(5, 0x15, id(100, 1_000, 8, 5000)), false, ""},
		{"new space id", base, sp(9, 0x15, id(400, 3_000, 8, 0)), false, "not in the base"},
		{"flags changed", base, sp(5, 0x21, id(100, 1_000, 8, 5000)), false, "flags"},
		{"older ferry base", base, sp(6, 0x15, id(100, 1_000, 8, 5000)), false, "no identity"},
		{"discarded and imported: other inode", base, sp(5, 0x15, id(101, 1_000, 8, 0)), false, "inode"},
		{"inode reused, other birth", base, sp(5, 0x15, id(100, 4_000, 8, 9000)), false, "created at another time"},
		{"page 0 LSN went back", base, sp(7, 0x15, id(200, 0, 8, 0)), false, "below the base"},
		{"shrank", base, sp(7, 0x15, id(200, 0, 6, 9000)), false, "truncated"},
		{"birth unknown now", base, sp(5, 0x15, id(100, 0, 8, 9000)), false, ""},
		{"imported before the base, unchanged", base, sp(8, 0x15, id(300, 2_000, 8, 0)), false, ""},
		{"same inode and birth, file ops in the redo", base, sp(5, 0x15, id(100, 1_000, 12, 9000)), true, "redo"},
		{"no manifest: page 0 at LSN 0", nil, sp(5, 0x15, id(100, 1_000, 8, 0)), false, "LSN 0"},
		{"no manifest: file ops in the redo", nil, sp(5, 0x15, id(100, 1_000, 8, 9000)), true, "redo"},
		{"no manifest: written since", nil, sp(5, 0x15, id(100, 1_000, 8, 9000)), false, ""},
		{"no manifest: untouched", nil, sp(5, 0x15, id(100, 1_000, 8, 3000)), false, ""},
	}
	for _, c := range cases {
		got := replaced(c.spaces, c.now, c.ops)
		if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: replaced = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestBaseSpaces: the base's tablespaces by space id, from its copies and deltas, not
// its system tablespace nor other files.
func TestBaseSpaces(t *testing.T) {
	m := &manifest.Manifest{Files: []manifest.File{
		{Path: "ibdata1", Kind: manifest.KindInnoDB, Space: &manifest.Space{ID: 0, System: true}},
		{Path: "db/a.ibd", Kind: manifest.KindInnoDB, Space: &manifest.Space{ID: 5}},
		{Path: "db/b.ibd.delta", Kind: manifest.KindDelta, Space: &manifest.Space{ID: 6}},
		{Path: "db/b.ibd.meta", Kind: manifest.KindMeta},
	}}
	got := baseSpaces(m)
	if len(got) != 2 || got[5].ID != 5 || got[6].ID != 6 {
		t.Errorf("baseSpaces = %+v", got)
	}
}

// TestFileIdentity: the inode of a file, and a new file in its place is another
// identity (inode or birth time).
func TestFileIdentity(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.ibd")
	ident := func() (uint64, int64) {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		ino, birth, err := fileIdentity(fd)
		if err != nil || ino == 0 {
			t.Fatalf("fileIdentity = %d, %d, %v", ino, birth, err)
		}
		return ino, birth
	}
	ino1, birth1 := ident()
	// keep the first inode in use so the second file cannot reuse it
	keep := p + ".old"
	if err := os.Rename(p, keep); err != nil {
		t.Fatal(err)
	}
	ino2, birth2 := ident()
	if ino1 == ino2 && (birth1 == 0 || birth1 == birth2) {
		t.Errorf("two files, one identity: inode %d, birth %d and %d", ino1, birth1, birth2)
	}
}

// TestChangedSince: a page belongs in a delta when its LSN is above the base's, or,
// where imports are looked for, when it is written (not all zeros) at LSN 0.
func TestChangedSince(t *testing.T) {
	page := func(lsn uint64, data byte) []byte {
		p := make([]byte, 1024)
		binary.BigEndian.PutUint64(p[16:], lsn)
		p[100] = data
		return p
	}
	cases := []struct {
		name    string
		page    []byte
		imports bool
		want    bool
	}{
		{"above the base", page(5000, 1), false, true},
		{"at the base", page(4000, 1), true, false},
		{"imported page", page(0, 1), true, true},
		{"imported page, imports not looked for", page(0, 1), false, false},
		{"never written", page(0, 0), true, false},
	}
	for _, c := range cases {
		if got := changedSince(c.page, 4000, c.imports); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestReplacedInInterruptedCopy: against an interrupted copy (Base.Have), a file it
// does not hold whole is copied whole, the system tablespace's included, and so is a
// system tablespace file whose identity changed; the files it holds are compared as
// for any base.
func TestReplacedInInterruptedCopy(t *testing.T) {
	ident := &manifest.Identity{Inode: 100, BirthNS: 1_000, Pages: 8, LSN: 5000}
	sys := manifest.Space{ID: 0, Flags: 0x15, System: true, Identity: ident}
	tbl := manifest.Space{ID: 5, Flags: 0x15, Identity: ident}
	b := &Base{Spaces: map[uint32]manifest.Space{5: tbl}, Have: map[string]manifest.Space{"ibdata1": sys, "db/t.ibd": tbl}}
	grown := &manifest.Identity{Inode: 100, BirthNS: 1_000, Pages: 12, LSN: 9000}
	other := &manifest.Identity{Inode: 101, BirthNS: 2_000, Pages: 12, LSN: 9000}
	for _, c := range []struct {
		rel  string
		now  manifest.Space
		want string
	}{
		{"ibdata1", manifest.Space{ID: 0, Flags: 0x15, System: true, Identity: grown}, ""},
		{"ibdata1", manifest.Space{ID: 0, Flags: 0x15, System: true, Identity: other}, "another file"},
		{"ibdata2", manifest.Space{ID: 0, Flags: 0x15, System: true, FirstPage: 768, Identity: grown}, "not hold this file whole"},
		{"db/t.ibd", manifest.Space{ID: 5, Flags: 0x15, Identity: grown}, ""},
		{"db/t.ibd", manifest.Space{ID: 5, Flags: 0x15, Identity: other}, "another file"},
		{"db/u.ibd", manifest.Space{ID: 6, Flags: 0x15, Identity: grown}, "not hold this file whole"},
	} {
		got := b.replacedIn(c.rel, c.now, false)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s %+v: %q, want %q", c.rel, c.now.Identity, got, c.want)
		}
	}
	b.Have = nil // an ordinary base: the system tablespace is never replaced
	if got := b.replacedIn("ibdata1", manifest.Space{ID: 0, System: true, Identity: other}, false); got != "" {
		t.Errorf("ordinary base, ibdata1: %q", got)
	}
}

// TestDeltaReplacedSystem: a tablespace not the base's is copied whole (marked); a
// system tablespace file an interrupted copy lacks has every page copied, unmarked (it
// is made from nothing); one it holds that is another file is an error, never a delta
// onto the wrong file.
func TestDeltaReplacedSystem(t *testing.T) {
	j := &job{log: slog.New(slog.DiscardHandler)}
	b := &Base{Have: map[string]manifest.Space{"ibdata1": {System: true}}}
	for _, c := range []struct {
		src          srcFile
		whole, every bool
		fails        bool
	}{
		{srcFile{Rel: "db/t.ibd"}, true, false, false},
		{srcFile{Rel: "ibdata2", System: true}, false, true, false},
		{srcFile{Rel: "ibdata1", System: true}, false, false, true},
	} {
		dc := &deltaCopy{ij: &innoJob{src: c.src}}
		err := dc.replaced(j, b, "changed")
		if dc.whole != c.whole || dc.every != c.every || (err != nil) != c.fails {
			t.Errorf("%s: whole %v every %v err %v", c.src.Rel, dc.whole, dc.every, err)
		}
	}
}

// TestSameFileFollowsTheInodeAndBirth: the file copied is the same file while it is not
// replaced; a file deleted and created again, or another renamed over it, is not.
func TestSameFileFollowsTheInodeAndBirth(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.ibd")
	identity := func() *manifest.Space {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ino, birth, err := fileIdentity(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		return &manifest.Space{Identity: &manifest.Identity{Inode: ino, BirthNS: birth}}
	}
	if err := os.WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp := identity()
	if sp.Identity.BirthNS == 0 {
		t.Skip("the filesystem of the test's temp dir keeps no birth time")
	}
	if err := os.WriteFile(path, []byte("written again in place"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !sameFile(path, sp) {
		t.Fatal("a file written in place is not the same file")
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if sameFile(path, sp) {
		t.Fatal("a file renamed over the copied one is the same file")
	}
	sp = identity()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("c"), 0o600); err != nil {
		t.Fatal(err)
	}
	if sameFile(path, sp) {
		t.Fatal("a file deleted and created again is the same file")
	}
	if sameFile(path, &manifest.Space{}) || sameFile(path, nil) {
		t.Fatal("a space without a recorded identity matched")
	}
}
