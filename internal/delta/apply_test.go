package delta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/innodb"
)

// flags4K is FSP_SPACE_FLAGS of a legacy-format tablespace of 4 KiB pages.
const flags4K = 3 << 6

// testPage0 returns page 0 of space id recording a size of pages pages.
func testPage0(id, pages uint32, fill byte) []byte {
	p := testPage(id, 0, fill)
	clear(p[38:150])
	binary.BigEndian.PutUint32(p[38:], id)
	binary.BigEndian.PutUint32(p[46:], pages)
	binary.BigEndian.PutUint32(p[54:], flags4K)
	return p
}

// tablespace returns a file of n pages of space id, page i filled with fill+i.
func tablespace(id uint32, n int, fill byte) []byte {
	var b []byte
	for i := range n {
		if i == 0 {
			b = append(b, testPage0(id, uint32(n), fill)...)
			continue
		}
		b = append(b, testPage(id, uint32(i), fill+byte(i))...)
	}
	return b
}

func put(t *testing.T, root, rel string, b []byte) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// putDelta writes rel.delta and rel.meta holding pages of space id.
func putDelta(t *testing.T, inc, rel string, id uint32, pages map[uint32][]byte) {
	t.Helper()
	var nos []uint32
	for no := range pages {
		nos = append(nos, no)
	}
	slices.Sort(nos)
	put(t, inc, rel+".delta", writeDelta(t, testPS, nos, func(no uint32) []byte { return pages[no] }))
	put(t, inc, rel+".meta", Meta{PageSize: testPS, SpaceID: id}.Bytes())
}

func get(t *testing.T, root, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func absent(t *testing.T, root string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		if _, err := os.Lstat(filepath.Join(root, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", rel, err)
		}
	}
}

func spaceOf(t *testing.T, root, rel string) uint32 {
	t.Helper()
	h, err := innodb.ParseSpaceHeader(get(t, root, rel))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return h.SpaceID
}

func pageAt(t *testing.T, root, rel string, no int) []byte {
	t.Helper()
	b := get(t, root, rel)
	if len(b) < (no+1)*testPS {
		t.Fatalf("%s is %d bytes, no page %d", rel, len(b), no)
	}
	return b[no*testPS : (no+1)*testPS]
}

func TestApplyDir(t *testing.T) {
	target, inc := t.TempDir(), t.TempDir()
	// The base.
	put(t, target, "ibdata1", tablespace(0, 4, 0x10))
	put(t, target, "undo001", tablespace(1, 2, 0x18))
	put(t, target, "db/a.ibd", tablespace(5, 4, 0x20))
	put(t, target, "db/b.ibd", tablespace(6, 3, 0x30)) // renamed to db/c (no marker)
	put(t, target, "db/t.ibd", tablespace(7, 5, 0x40)) // truncated: new id 10
	put(t, target, "db/dropped.ibd", tablespace(8, 2, 0x50))
	put(t, target, "db/r1.ibd", tablespace(9, 2, 0x60)) // renamed by marker to db/r2
	put(t, target, "db/x.ibd", tablespace(11, 2, 0x70)) // .del
	put(t, target, "db/n.ibd", tablespace(12, 2, 0x80)) // .new
	put(t, target, "db/s1.ibd", tablespace(20, 2, 0x90))
	put(t, target, "db/s2.ibd", tablespace(21, 2, 0xa0)) // s1 and s2 swapped names
	for _, rel := range []string{"db/a.frm", "db/old.frm", "db/db.opt", "aria_log.00000001", "xtrabackup_checkpoints", "ib_logfile0", "ferry_manifest.json", "olddb/z.frm"} {
		put(t, target, rel, []byte("base "+rel))
	}
	put(t, target, ".ferry-incremental-1/keep.frm", []byte("scratch"))
	put(t, target, ".ferry-incremental-1/keep.ibd", []byte("scratch"))

	// The incremental backup.
	putDelta(t, inc, "ibdata1", 0, map[uint32][]byte{1: testPage(0, 1, 0xe1), 2: testPage(0, 2, 0xe2)})
	putDelta(t, inc, "undo001", 1, nil)
	putDelta(t, inc, "db/a.ibd", 5, map[uint32][]byte{0: testPage0(5, 10, 0xa0), 3: testPage(5, 3, 0xa3)})
	putDelta(t, inc, "db/c.ibd", 6, map[uint32][]byte{1: testPage(6, 1, 0xc1)})
	putDelta(t, inc, "db/t.ibd", 10, map[uint32][]byte{0: testPage0(10, 3, 0xb0), 2: testPage(10, 2, 0xb2)})
	putDelta(t, inc, "db/r2.ibd", 9, nil)
	putDelta(t, inc, "db/s1.ibd", 21, nil)
	putDelta(t, inc, "db/s2.ibd", 20, map[uint32][]byte{1: testPage(20, 1, 0xd1)})
	putDelta(t, inc, "newdb/q.ibd", 30, map[uint32][]byte{0: testPage0(30, 4, 0xf0)})
	put(t, inc, "db/r1.ren", []byte("./db/r2.ibd"))
	put(t, inc, "db/x.del", nil)
	put(t, inc, "db/n.new", tablespace(13, 3, 0x11))
	for _, rel := range []string{"db/a.frm", "db/db.opt", "db/c.frm", "aria_log.00000001", "xtrabackup_checkpoints", "ib_logfile0", "newdb/q.frm", "newdb/db.opt"} {
		put(t, inc, rel, []byte("inc "+rel))
	}

	var logs bytes.Buffer
	st, err := ApplyDir(target, inc, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"incremental backup applied", "from=db/b.ibd to=db/c.ibd", "file=db/dropped.ibd"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logs.String())
		}
	}
	want := Stats{Deltas: 9, Pages: 9, Created: 3, Renamed: 4, Removed: 3}
	if st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}

	// Pages at their offsets; the rest untouched.
	if !bytes.Equal(pageAt(t, target, "ibdata1", 1), testPage(0, 1, 0xe1)) || !bytes.Equal(pageAt(t, target, "ibdata1", 3), testPage(0, 3, 0x13)) {
		t.Error("ibdata1 pages wrong")
	}
	// Extension to FSP_SIZE from the new page 0.
	if a := get(t, target, "db/a.ibd"); len(a) != 10*testPS || !bytes.Equal(a[3*testPS:4*testPS], testPage(5, 3, 0xa3)) || !bytes.Equal(a[testPS:2*testPS], testPage(5, 1, 0x21)) {
		t.Errorf("db/a.ibd: %d bytes or pages wrong", len(a))
	}
	// Rename by space id, and the swap.
	if spaceOf(t, target, "db/c.ibd") != 6 || !bytes.Equal(pageAt(t, target, "db/c.ibd", 1), testPage(6, 1, 0xc1)) || !bytes.Equal(pageAt(t, target, "db/c.ibd", 2), testPage(6, 2, 0x32)) {
		t.Error("db/b.ibd not renamed to db/c.ibd with its pages")
	}
	if spaceOf(t, target, "db/s1.ibd") != 21 || spaceOf(t, target, "db/s2.ibd") != 20 || !bytes.Equal(pageAt(t, target, "db/s2.ibd", 1), testPage(20, 1, 0xd1)) {
		t.Error("s1/s2 not swapped")
	}
	// Truncated table re-created from its delta alone.
	if tt := get(t, target, "db/t.ibd"); len(tt) != 3*testPS || spaceOf(t, target, "db/t.ibd") != 10 || !bytes.Equal(tt[testPS:2*testPS], make([]byte, testPS)) {
		t.Errorf("db/t.ibd not re-created (%d bytes)", len(tt))
	}
	if spaceOf(t, target, "db/r2.ibd") != 9 || spaceOf(t, target, "db/n.ibd") != 13 || spaceOf(t, target, "newdb/q.ibd") != 30 {
		t.Error("marker or new table wrong")
	}
	if len(get(t, target, "newdb/q.ibd")) != 4*testPS {
		t.Error("newdb/q.ibd not extended")
	}
	absent(t, target, "db/b.ibd", "db/r1.ibd", "db/x.ibd", "db/dropped.ibd", "db/old.frm", "ferry_manifest.json", "olddb")
	for _, rel := range []string{"db/a.frm", "db/c.frm", "xtrabackup_checkpoints", "ib_logfile0", "newdb/db.opt"} {
		if got := string(get(t, target, rel)); got != "inc "+rel {
			t.Errorf("%s = %q", rel, got)
		}
	}
	if string(get(t, target, ".ferry-incremental-1/keep.ibd")) != "scratch" || string(get(t, target, ".ferry-incremental-1/keep.frm")) != "scratch" {
		t.Error("scratch directory touched")
	}
	// inc is left as it was.
	for _, rel := range []string{"db/r1.ren", "db/x.del", "db/n.new", "db/a.ibd.delta", "db/a.ibd.meta"} {
		get(t, inc, rel)
	}
}

func TestApplyDirErrors(t *testing.T) {
	cases := map[string]func(t *testing.T, target, inc string){
		"no meta": func(t *testing.T, target, inc string) {
			put(t, inc, "db/a.ibd.delta", writeDelta(t, testPS, nil, nil))
		},
		"bad meta": func(t *testing.T, target, inc string) {
			putDelta(t, inc, "db/a.ibd", 5, nil)
			put(t, inc, "db/a.ibd.meta", []byte("page_size = 4096\n"))
		},
		"corrupt delta": func(t *testing.T, target, inc string) {
			putDelta(t, inc, "db/a.ibd", 5, nil)
			put(t, inc, "db/a.ibd.delta", []byte("nonsense"))
		},
		"page 0 of another space": func(t *testing.T, target, inc string) {
			putDelta(t, inc, "db/a.ibd", 5, map[uint32][]byte{0: testPage0(6, 2, 1)})
		},
		"system file of another space": func(t *testing.T, target, inc string) {
			put(t, target, "ibdata1", tablespace(3, 2, 1))
			putDelta(t, inc, "ibdata1", 0, nil)
		},
		"ren leaves target": func(t *testing.T, target, inc string) {
			putDelta(t, inc, "ibdata1", 0, nil)
			put(t, target, "db/a.ibd", tablespace(5, 2, 1))
			put(t, inc, "db/a.ren", []byte("../../etc/x"))
		},
		"no delta at all": func(t *testing.T, target, inc string) {
			put(t, inc, "db/a.frm", nil)
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			target, inc := t.TempDir(), t.TempDir()
			put(t, target, "db/a.ibd", tablespace(5, 2, 1))
			setup(t, target, inc)
			if _, err := ApplyDir(target, inc, nil); err == nil {
				t.Fatal("no error")
			} else {
				t.Log(err)
			}
			get(t, target, "db/a.ibd")
		})
	}
}

func TestApplyDirIncInsideTarget(t *testing.T) {
	target := t.TempDir()
	put(t, target, "ibdata1", tablespace(0, 2, 1))
	for rel, ok := range map[string]bool{".ferry-incremental-1": true, "inc": false} {
		inc := filepath.Join(target, rel)
		putDelta(t, inc, "ibdata1", 0, map[uint32][]byte{1: testPage(0, 1, 9)})
		_, err := ApplyDir(target, inc, nil)
		if (err == nil) != ok {
			t.Errorf("inc %s: err = %v", rel, err)
		}
	}
	if _, err := ApplyDir(target, target, nil); err == nil {
		t.Error("inc == target accepted")
	}
}

// TestApplyDirMarkersAfterDeltas: an incremental stream renamed db/x to db/y during
// its copy after it had sent x's delta: it cancels the delta with db/x.del and sends
// the tablespace whole as db/y.new. Applied in that order the base's db/x is gone and
// db/y holds the whole copy; markers first would have renamed y back to x.
func TestApplyDirMarkersAfterDeltas(t *testing.T) {
	target, inc := t.TempDir(), t.TempDir()
	put(t, target, "db/x.ibd", tablespace(5, 4, 10))
	put(t, target, "ibdata1", tablespace(0, 4, 1))
	putDelta(t, inc, "ibdata1", 0, nil)
	putDelta(t, inc, "db/x.ibd", 5, map[uint32][]byte{2: testPage(5, 2, 99)})
	put(t, inc, "db/x.del", nil)
	whole := tablespace(5, 6, 50)
	put(t, inc, "db/y.new", whole)
	if _, err := ApplyDir(target, inc, nil); err != nil {
		t.Fatal(err)
	}
	absent(t, target, "db/x.ibd")
	if got := get(t, target, "db/y.ibd"); !bytes.Equal(got, whole) {
		t.Errorf("db/y.ibd is not the whole copy sent as db/y.new (%d bytes, want %d)", len(got), len(whole))
	}
}

// TestListPagesAndSkip: ListPages lists a delta's pages from its headers (the system
// tablespace's with its file), and ApplyDirWith leaves the pages it is told to skip
// as they were, page 0 included only if asked.
func TestListPagesAndSkip(t *testing.T) {
	target, inc := t.TempDir(), t.TempDir()
	base := tablespace(5, 4, 10)
	put(t, target, "db/x.ibd", base)
	put(t, target, "ibdata1", tablespace(0, 4, 1))
	putDelta(t, inc, "ibdata1", 0, map[uint32][]byte{1: testPage(0, 1, 77)})
	putDelta(t, inc, "db/x.ibd", 5, map[uint32][]byte{2: testPage(5, 2, 99), 3: testPage(5, 3, 98)})
	var got []PageKey
	if err := ListPages(inc, func(k PageKey) { got = append(got, k) }); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b PageKey) int { return int(a.Space)*100 + int(a.Page) - int(b.Space)*100 - int(b.Page) })
	want := []PageKey{{0, "ibdata1", 1}, {5, "", 2}, {5, "", 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("ListPages: %v, want %v", got, want)
	}
	st, err := ApplyDirWith(target, inc, nil, Options{Skip: func(k PageKey) bool { return k == PageKey{5, "", 2} }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 1 || st.Pages != 2 {
		t.Errorf("stats %+v, want 1 page skipped and 2 written", st)
	}
	if !bytes.Equal(pageAt(t, target, "db/x.ibd", 2), base[2*testPS:3*testPS]) {
		t.Error("a skipped page was written")
	}
	if !bytes.Equal(pageAt(t, target, "db/x.ibd", 3), testPage(5, 3, 98)) {
		t.Error("a page not skipped was not written")
	}
}

// TestOtherMatchesApply: Other names exactly the files ApplyDir copies as they are.
func TestOtherMatchesApply(t *testing.T) {
	inc := t.TempDir()
	names := []string{"ib_logfile0", "db/t.frm", "db/db.opt", "ferry_manifest.json", "db/t.ibd.delta", "db/t.ibd.meta", "db/u.del", "db/v.ren", "db/w.new"}
	for _, rel := range names {
		put(t, inc, rel, []byte(rel))
	}
	f, err := scanInc(inc)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range names {
		if got, want := Other(rel), slices.Contains(f.other, rel); got != want {
			t.Errorf("Other(%q) = %v, applying copies it as it is: %v", rel, got, want)
		}
	}
}

// TestApplyDirOthersFromNext: a link that the next one follows writes its pages and
// DDL, but leaves the files that are not tablespaces (its redo log, .frm files) to the
// next link: the base's stay as they were, none of the link's are copied in.
func TestApplyDirOthersFromNext(t *testing.T) {
	target, inc := t.TempDir(), t.TempDir()
	put(t, target, "db/x.ibd", tablespace(5, 4, 10))
	put(t, target, "db/gone.ibd", tablespace(6, 2, 20))
	put(t, target, "ibdata1", tablespace(0, 4, 1))
	putDelta(t, inc, "ibdata1", 0, nil)
	putDelta(t, inc, "db/x.ibd", 5, map[uint32][]byte{2: testPage(5, 2, 99)})
	for _, rel := range []string{"ib_logfile0", "db/x.frm", "db/gone.frm"} {
		put(t, target, rel, []byte("base "+rel))
	}
	for _, rel := range []string{"ib_logfile0", "db/x.frm", "db/new.frm"} {
		put(t, inc, rel, []byte("inc "+rel))
	}
	if _, err := ApplyDirWith(target, inc, nil, Options{OthersFromNext: true, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pageAt(t, target, "db/x.ibd", 2), testPage(5, 2, 99)) {
		t.Error("the link's page was not written")
	}
	absent(t, target, "db/gone.ibd", "db/new.frm")
	for _, rel := range []string{"ib_logfile0", "db/x.frm", "db/gone.frm"} {
		if got := string(get(t, target, rel)); got != "base "+rel {
			t.Errorf("%s = %q, want the base's, left for the next link", rel, got)
		}
	}
	// The next link brings its own and replaces them all.
	if _, err := ApplyDir(target, inc, nil); err != nil {
		t.Fatal(err)
	}
	absent(t, target, "db/gone.frm")
	for _, rel := range []string{"ib_logfile0", "db/x.frm", "db/new.frm"} {
		if got := string(get(t, target, rel)); got != "inc "+rel {
			t.Errorf("after the next link, %s = %q", rel, got)
		}
	}
}

// TestApplyDirWhole: a delta marked whole (ferry_whole = 1) replaces the target file of
// its space id instead of writing over it: a shorter file imported in place of a longer
// one under the same space id leaves none of the old pages behind; an unmarked delta
// still writes over the file.
func TestApplyDirWhole(t *testing.T) {
	target, inc := t.TempDir(), t.TempDir()
	put(t, target, "ibdata1", tablespace(0, 4, 1))
	put(t, target, "db/u.ibd", tablespace(5, 8, 10))
	put(t, target, "db/w.ibd", tablespace(6, 8, 10))
	putDelta(t, inc, "ibdata1", 0, nil)
	imported := tablespace(5, 3, 70)
	pages := map[uint32][]byte{}
	for i := range 3 {
		pages[uint32(i)] = imported[i*testPS : (i+1)*testPS]
	}
	putDelta(t, inc, "db/u.ibd", 5, pages)
	put(t, inc, "db/u.ibd.meta", Meta{PageSize: testPS, SpaceID: 5, Whole: true}.Bytes())
	putDelta(t, inc, "db/w.ibd", 6, map[uint32][]byte{1: testPage(6, 1, 99)})
	if _, err := ApplyDir(target, inc, nil); err != nil {
		t.Fatal(err)
	}
	if got := get(t, target, "db/u.ibd"); !bytes.Equal(got, imported) {
		t.Errorf("db/u.ibd: %d bytes, want the %d bytes of the whole delta and nothing of the old file", len(got), len(imported))
	}
	if got := get(t, target, "db/w.ibd"); len(got) != 8*testPS || !bytes.Equal(pageAt(t, target, "db/w.ibd", 1), testPage(6, 1, 99)) {
		t.Errorf("db/w.ibd: %d bytes; an unmarked delta must write over the file", len(got))
	}
}

// TestApplyDirWholeRefused: a delta marked whole that does not start with page 0, or
// one of the system tablespace, is refused before the target file is touched.
func TestApplyDirWholeRefused(t *testing.T) {
	for name, c := range map[string]struct {
		space uint32
		rel   string
		pages map[uint32][]byte
	}{
		"no page 0":         {5, "db/u.ibd", map[uint32][]byte{1: testPage(5, 1, 70)}},
		"system tablespace": {0, "ibdata1", map[uint32][]byte{0: testPage(0, 0, 70)}},
	} {
		t.Run(name, func(t *testing.T) {
			target, inc := t.TempDir(), t.TempDir()
			put(t, target, "ibdata1", tablespace(0, 4, 1))
			put(t, target, "db/u.ibd", tablespace(5, 8, 10))
			before := get(t, target, c.rel)
			if c.rel != "ibdata1" {
				putDelta(t, inc, "ibdata1", 0, nil)
			}
			putDelta(t, inc, c.rel, c.space, c.pages)
			put(t, inc, c.rel+".meta", Meta{PageSize: testPS, SpaceID: c.space, Whole: true}.Bytes())
			if _, err := ApplyDir(target, inc, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("applied: %v", err)
			}
			if !bytes.Equal(get(t, target, c.rel), before) {
				t.Error("the refused delta changed the file")
			}
		})
	}
}

// TestApplyDirSystemFromNothing: a delta holding every page of the system tablespace,
// unmarked, applied where the target has no ibdata1, makes the file (a resumed clone
// sends a system tablespace file its interrupted copy lacks this way).
func TestApplyDirSystemFromNothing(t *testing.T) {
	target, inc := t.TempDir(), t.TempDir()
	want := tablespace(0, 4, 1)
	pages := map[uint32][]byte{}
	for i := range 4 {
		pages[uint32(i)] = want[i*testPS : (i+1)*testPS]
	}
	putDelta(t, inc, "ibdata1", 0, pages)
	if _, err := ApplyDir(target, inc, nil); err != nil {
		t.Fatal(err)
	}
	if got := get(t, target, "ibdata1"); !bytes.Equal(got, want) {
		t.Fatalf("ibdata1 made from a full delta: %d bytes, want the %d of the source", len(got), len(want))
	}
}
