package delta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testPS = 4096 // clusters of 1023 data pages

// testPage returns a page of space id whose bytes after the FIL header are fill.
func testPage(id, no uint32, fill byte) []byte {
	p := bytes.Repeat([]byte{fill}, testPS)
	binary.BigEndian.PutUint32(p[4:], no)
	binary.BigEndian.PutUint32(p[34:], id)
	return p
}

func writeDelta(t testing.TB, ps int, nos []uint32, page func(no uint32) []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, ps)
	for _, no := range nos {
		if err := w.Add(no, page(no)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != int64(buf.Len()) || w.Pages() != len(nos) {
		t.Fatalf("Written %d Pages %d, buffer %d bytes of %d pages", w.Written(), w.Pages(), buf.Len(), len(nos))
	}
	return buf.Bytes()
}

func readAll(t testing.TB, b []byte, ps int) ([]uint32, [][]byte, error) {
	t.Helper()
	r := NewReader(bytes.NewReader(b), int64(len(b)), ps)
	var nos []uint32
	var pages [][]byte
	for i := 0; ; i++ {
		no, p, err := r.Next()
		if err == io.EOF {
			return nos, pages, nil
		}
		if err != nil {
			return nos, pages, err
		}
		if len(p) != ps {
			t.Fatalf("page of %d bytes", len(p))
		}
		nos, pages = append(nos, no), append(pages, bytes.Clone(p))
		if i > len(b)/ps {
			t.Fatal("reader returns more pages than the file holds")
		}
	}
}

func seq(n int, step uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i) * step
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	full := ClusterPages(testPS)
	for _, n := range []int{0, 1, 2, full - 1, full, full + 1, 2 * full, 2*full + 5} {
		nos := seq(n, 3)
		b := writeDelta(t, testPS, nos, func(no uint32) []byte { return testPage(7, no, byte(no)) })
		clusters := max(1, (n+full-1)/full)
		if want := (n + clusters) * testPS; len(b) != want {
			t.Fatalf("%d pages: delta of %d bytes, want %d", n, len(b), want)
		}
		for k := range clusters {
			magic := string(b[k*(full+1)*testPS:][:4])
			if want := map[bool]string{true: "XTRA", false: "xtra"}[k == clusters-1]; magic != want {
				t.Fatalf("%d pages: cluster %d magic %q, want %q", n, k, magic, want)
			}
		}
		got, pages, err := readAll(t, b, testPS)
		if err != nil {
			t.Fatalf("%d pages: %v", n, err)
		}
		if len(got) != n {
			t.Fatalf("%d pages: read %d", n, len(got))
		}
		for i, no := range got {
			if no != nos[i] || !bytes.Equal(pages[i], testPage(7, no, byte(no))) {
				t.Fatalf("%d pages: page %d is %d or differs", n, i, no)
			}
		}
	}
}

func TestEmptyDeltaBytes(t *testing.T) {
	b := writeDelta(t, 16384, nil, nil)
	want := make([]byte, 16384)
	copy(want, "XTRA\xff\xff\xff\xff")
	if !bytes.Equal(b, want) {
		t.Fatalf("empty delta: % x...", b[:16])
	}
}

func TestWriterRefuses(t *testing.T) {
	w := NewWriter(io.Discard, testPS)
	if err := w.Add(5, make([]byte, testPS)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		no   uint32
		size int
	}{{5, testPS}, {4, testPS}, {6, testPS - 1}, {0xFFFFFFFF, testPS}} {
		if err := w.Add(c.no, make([]byte, c.size)); err == nil {
			t.Errorf("Add(%d, %d bytes) accepted", c.no, c.size)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Close() == nil || w.Add(9, make([]byte, testPS)) == nil {
		t.Error("writer usable after Close")
	}
	if NewWriter(io.Discard, 3000).Add(0, make([]byte, 3000)) == nil {
		t.Error("page size 3000 accepted")
	}
}

func TestReaderRejects(t *testing.T) {
	full := ClusterPages(testPS)
	valid := writeDelta(t, testPS, seq(full+2, 1), func(no uint32) []byte { return testPage(1, no, 1) })
	cases := map[string]func([]byte) []byte{
		"empty":             func([]byte) []byte { return nil },
		"bad magic":         func(b []byte) []byte { copy(b, "abcd"); return b },
		"truncated":         func(b []byte) []byte { return b[:len(b)-testPS] },
		"not page multiple": func(b []byte) []byte { return b[:len(b)-1] },
		"trailing":          func(b []byte) []byte { return append(b, make([]byte, testPS)...) },
		"no last cluster":   func(b []byte) []byte { return b[:(full+1)*testPS] },
		"short xtra": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[4+4*10:], endOfList)
			return b
		},
		"decreasing": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[(full+1)*testPS+4:], 3)
			return b
		},
		"repeated": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[8:], 0)
			return b
		},
	}
	for name, mangle := range cases {
		_, _, err := readAll(t, mangle(bytes.Clone(valid)), testPS)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

// TestReadMariabackupDeltas reads delta files made by mariadb-backup 10.11.19
// (testdata/mariabackup: a.ibd.delta holds the 4 pages an UPDATE of 4 rows changed
// after the full backup, c.ibd.delta is of an unchanged table: one header page).
func TestReadMariabackupDeltas(t *testing.T) {
	metas, _ := filepath.Glob("testdata/mariabackup/*.meta")
	if len(metas) != 2 {
		t.Fatalf("testdata/mariabackup holds %d .meta files, want 2", len(metas))
	}
	pagesOf := map[string]int{}
	for _, mp := range metas {
		mb, err := os.ReadFile(mp)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseMeta(mb)
		if err != nil {
			t.Fatalf("%s: %v", mp, err)
		}
		if !bytes.Equal(m.Bytes(), mb) {
			t.Errorf("%s: Bytes() = %q, file holds %q", mp, m.Bytes(), mb)
		}
		b, err := os.ReadFile(strings.TrimSuffix(mp, ".meta") + ".delta")
		if err != nil {
			t.Fatal(err)
		}
		nos, pages, err := readAll(t, b, m.Physical())
		if err != nil {
			t.Fatalf("%s: %v", mp, err)
		}
		for i, p := range pages {
			if got := binary.BigEndian.Uint32(p[4:]); got != nos[i] {
				t.Errorf("%s: page listed as %d says it is page %d", mp, nos[i], got)
			}
		}
		pagesOf[filepath.Base(mp)] = len(nos)
	}
	if pagesOf["a.ibd.meta"] != 4 || pagesOf["c.ibd.meta"] != 0 {
		t.Errorf("pages read: %v, want 4 in a.ibd.delta and none in c.ibd.delta", pagesOf)
	}
}

func TestMeta(t *testing.T) {
	m := Meta{PageSize: 16384, SpaceID: 6}
	if got := string(m.Bytes()); got != "page_size = 16384\nzip_size = 0 \nspace_id = 6\n" {
		t.Fatalf("Bytes() = %q", got)
	}
	for _, in := range []string{string(m.Bytes()), "space_id=6\npage_size = 16384\nzip_size = 0\nfuture = x\n"} {
		if got, err := ParseMeta([]byte(in)); err != nil || got != m {
			t.Errorf("ParseMeta(%q) = %+v, %v", in, got, err)
		}
	}
	w := Meta{PageSize: 16384, SpaceID: 6, Whole: true}
	if got := string(w.Bytes()); got != string(m.Bytes())+"ferry_whole = 1\n" {
		t.Errorf("whole: Bytes() = %q", got)
	}
	if got, err := ParseMeta(w.Bytes()); err != nil || got != w {
		t.Errorf("whole: ParseMeta = %+v, %v", got, err)
	}
	z := Meta{PageSize: 8192, ZipSize: 8192, SpaceID: 1}
	if got, err := ParseMeta(z.Bytes()); err != nil || got != z || got.Physical() != 8192 {
		t.Errorf("compressed: %+v, %v", got, err)
	}
	bad := []string{
		"", "page_size = 16384\nzip_size = 0\n", "page_size = 16000\nzip_size = 0\nspace_id = 1\n",
		"page_size = 16384\nzip_size = 32768\nspace_id = 1\n", "page_size = 16384\nzip_size = 0\nspace_id = -1\n",
		"page_size = 16384\nzip_size = 0\nspace_id = 4294967296\n", "page_size = 16384\nzip_size = 0\nspace_id = 1\nspace_id = 2\n",
		"page_size 16384\n", strings.Repeat(" ", MaxMetaSize+1),
	}
	for _, in := range bad {
		if _, err := ParseMeta([]byte(in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseMeta(%.40q): err = %v, want ErrCorrupt", in, err)
		}
	}
}

func FuzzReader(f *testing.F) {
	const ps = 1024
	page := func(no uint32) []byte { return bytes.Repeat([]byte{byte(no)}, ps) }
	f.Add(writeDelta(f, ps, []uint32{0, 3, 9}, page))
	f.Add(writeDelta(f, ps, seq(ClusterPages(ps)+1, 1), page))
	f.Add(writeDelta(f, ps, nil, page))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = readAll(t, b, ps)
	})
}
