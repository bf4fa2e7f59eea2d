package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/innodb"
)

const fxPage = 16384

// fixtureSpace writes a tablespace file whose pages 0..3 are those a real server
// wrote for a new table (internal/innodb/testdata: FSP_HDR, IBUF_BITMAP, INODE, root;
// the rest of the first extent free by its bits, the pages from the free limit 64 on
// free by the limit) and whose other listed pages hold bytes no page check accepts.
// The file is as long as its last listed page.
func fixtureSpace(t *testing.T, garbage ...uint32) (*innoJob, *directio.File) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "innodb", "testdata", "fcrc32.after.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	head, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.ibd")
	if err := os.WriteFile(path, head, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, no := range garbage {
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xab}, fxPage), int64(no)*fxPage); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	h, err := innodb.ParseSpaceHeader(head)
	if err != nil {
		t.Fatal(err)
	}
	in, err := directio.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	ij := &innoJob{src: srcFile{Abs: path, Rel: "db/t.ibd"}, checker: innodb.NewChecker(h, false), page: fxPage, header: h}
	return ij, in
}

func pageRange(from, to uint32) []uint32 {
	var out []uint32
	for no := from; no < to; no++ {
		out = append(out, no)
	}
	return out
}

// TestReadChunkFreeZeroesFreePages: the pages the descriptors mark free (by their bits
// and past the free limit) come out as zeros, unchecked, so their stale bytes neither
// travel nor fail the copy; the pages in use keep their bytes; the count is kept. The
// chunk holds page 0, so nothing is read on its own (a small file costs one read).
func TestReadChunkFreeZeroesFreePages(t *testing.T) {
	ij, in := fixtureSpace(t, pageRange(4, 70)...)
	j := &job{log: slog.New(slog.DiscardHandler)}
	m := j.newFreeMap(ij)
	if m == nil {
		t.Fatal("no free map for an .ibd with a valid page 0")
	}
	want := make([]byte, 70*fxPage)
	if _, err := in.ReadAt(want, 0); err != nil {
		t.Fatal(err)
	}
	buf := directio.AlignedBuffer(70 * fxPage)
	n, err := j.readChunkFree(context.Background(), in, ij, m, buf, 0)
	if err != nil || n != 70*fxPage {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	for no := range 70 {
		got := buf[no*fxPage : (no+1)*fxPage]
		if no < 4 && !bytes.Equal(got, want[no*fxPage:(no+1)*fxPage]) {
			t.Errorf("page %d in use was changed", no)
		}
		if no >= 4 && !innodb.IsZero(got) {
			t.Errorf("free page %d was not zeroed", no)
		}
	}
	if got := j.stats.freePages.Load(); got != 66 {
		t.Errorf("free pages counted %d, want 66", got)
	}
	if m.reads != 0 {
		t.Errorf("%d descriptor pages read on their own: the chunk holds page 0", m.reads)
	}
}

// TestReadChunkFreeSkipsRead: a chunk whose pages are all free, within the size the
// file had when the backup planned it, is not read at all: it comes out whole and
// zeroed even where the file is shorter now than planned (which a read would show as
// a short read). Past the planned size, the chunk is read.
func TestReadChunkFreeSkipsRead(t *testing.T) {
	ij, in := fixtureSpace(t, pageRange(4, 70)...)
	ij.src.Size = 80 * fxPage
	j := &job{log: slog.New(slog.DiscardHandler)}
	buf := directio.AlignedBuffer(16 * fxPage)
	n, err := j.readChunkFree(context.Background(), in, ij, j.newFreeMap(ij), buf, 64*fxPage)
	if err != nil || n != 16*fxPage || !innodb.IsZero(buf) || j.stats.freePages.Load() != 16 {
		t.Fatalf("free chunk: %d bytes, %v, zero %v, %d free pages: want 16 pages skipped", n, err, innodb.IsZero(buf), j.stats.freePages.Load())
	}
	ij.src.Size = 70 * fxPage
	n, err = j.readChunkFree(context.Background(), in, ij, j.newFreeMap(ij), buf, 64*fxPage)
	if err != nil || n != 6*fxPage || !innodb.IsZero(buf[:n]) {
		t.Errorf("chunk past the planned size: %d bytes, %v: want the 6 pages read, zeroed", n, err)
	}
	ij.src.Size = 80 * fxPage
	n, err = j.readChunkFree(context.Background(), in, ij, j.newFreeMap(ij), buf, 0)
	if err != nil || n != 16*fxPage || innodb.IsZero(buf[fxPage:2*fxPage]) {
		t.Errorf("chunk with pages in use: %d bytes, %v: want it read, page 1 kept", n, err)
	}
}

// TestReadChunkFreeFarRange: a segment far into the file reads page 0 (the free
// limit) on its own before its chunk; a range wholly past the limit needs no
// descriptor (its descriptor and change-buffer bitmap pages, never written, are zeros
// anyway), and its other pages are free.
func TestReadChunkFreeFarRange(t *testing.T) {
	per := uint32(fxPage) // pages per descriptor page
	ij, in := fixtureSpace(t, per+2, per+3)
	j := &job{log: slog.New(slog.DiscardHandler)}
	m := j.newFreeMap(ij)
	buf := directio.AlignedBuffer(4 * fxPage)
	n, err := j.readChunkFree(context.Background(), in, ij, m, buf, int64(per)*fxPage)
	if err != nil || n != 4*fxPage {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	if !innodb.IsZero(buf) || j.stats.freePages.Load() != 2 {
		t.Errorf("free pages %d+2, %d+3 not zeroed (%d counted)", per, per, j.stats.freePages.Load())
	}
	if m.descs[per] != nil || m.descs[0] == nil || m.limit != 64 || m.reads != 1 {
		t.Errorf("descriptor %d %v, page 0 %v, limit %d, %d pages read alone: want page 0 alone, limit 64",
			per, m.descs[per] != nil, m.descs[0] != nil, m.limit, m.reads)
	}
}

// TestFreeMapTrustsNothingUnread: without a page 0 that validated, or without the
// descriptor of a range below the free limit, no page is taken as free.
func TestFreeMapTrustsNothingUnread(t *testing.T) {
	ij, _ := fixtureSpace(t)
	j := &job{}
	m := j.newFreeMap(ij)
	b := bytes.Repeat([]byte{1}, 8*fxPage)
	m.descs[0] = nil
	if z := m.clear(b, 4*fxPage); z != 0 {
		t.Errorf("zeroed %d pages without a page 0", z)
	}
	m.descs[0], m.limit = make([]byte, fxPage), 1<<20
	if z := m.clear(b, int64(fxPage)*fxPage+4*fxPage); z != 0 || !bytes.Equal(b, bytes.Repeat([]byte{1}, 8*fxPage)) {
		t.Errorf("zeroed %d pages of a range whose descriptor was not read", z)
	}
}

// TestFreeMapScope: free pages are kept as they are with KeepFreePages, in the
// system tablespace, in files other than .ibd (undo tablespaces) and where page 0 was
// not yet written.
func TestFreeMapScope(t *testing.T) {
	ij, _ := fixtureSpace(t)
	if (&job{cfg: Config{KeepFreePages: true}}).newFreeMap(ij) != nil {
		t.Error("KeepFreePages: free pages still zeroed")
	}
	for _, src := range []srcFile{{Rel: "ibdata1", System: true}, {Rel: "undo001"}} {
		k := &innoJob{src: src, checker: ij.checker, header: ij.header, page: ij.page}
		if (&job{}).newFreeMap(k) != nil {
			t.Errorf("%s: free pages zeroed", src.Rel)
		}
	}
	if (&job{}).newFreeMap(&innoJob{src: ij.src, header: ij.header, page: ij.page}) != nil {
		t.Error("page 0 not written: free pages zeroed")
	}
}
