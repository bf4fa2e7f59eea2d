package pagediff

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/innodb"
)

const (
	cryptMagic16k = 10428 // where page 0 of a 16 KiB tablespace keeps its encryption metadata
	testPage      = 16384
	fcrc32_16     = 0x15 // full_crc32 marker, page ssize 5 (16 KiB)
)

// tablespace returns n pages of a full_crc32 16 KiB tablespace with space id id; page
// i carries its number, a distinct LSN and some payload.
func tablespace(id uint32, n int, flags uint32) []byte {
	b := make([]byte, n*testPage)
	for i := 0; i < n; i++ {
		p := b[i*testPage : (i+1)*testPage]
		binary.BigEndian.PutUint32(p[4:], uint32(i))
		binary.BigEndian.PutUint64(p[16:], uint64(1000+i))
		binary.BigEndian.PutUint16(p[24:], 17855)
		binary.BigEndian.PutUint32(p[34:], id)
		for j := 38; j < testPage-8; j += 97 {
			p[j] = byte(i + j)
		}
	}
	binary.BigEndian.PutUint32(b[38:], id)        // FSP_SPACE_ID
	binary.BigEndian.PutUint32(b[46:], uint32(n)) // FSP_SIZE
	binary.BigEndian.PutUint32(b[50:], uint32(n)) // FSP_FREE_LIMIT
	binary.BigEndian.PutUint32(b[54:], flags)     // FSP_SPACE_FLAGS
	binary.BigEndian.PutUint32(b[xdes0+20:], 2)   // XDES_STATE of pages 0..63: FREE_FRAG, every page in use
	return b
}

// xdes0 is where page 0 keeps the descriptor of pages 0..63 (XDES_ARR_OFFSET).
const xdes0 = 38 + 112

// testDirs writes the same synthetic prepared backup twice and returns both.
func testDirs(t *testing.T) (a, b string) {
	t.Helper()
	root := t.TempDir()
	a, b = filepath.Join(root, "oracle"), filepath.Join(root, "native")
	for _, d := range []string{a, b} {
		write(t, d, "ibdata1", tablespace(0, 8, fcrc32_16))
		write(t, d, "undo001", tablespace(1, 4, fcrc32_16))
		write(t, d, "db/t.ibd", tablespace(5, 6, fcrc32_16))
		write(t, d, "db/t.frm", []byte("frm "+d))        // not InnoDB
		write(t, d, "ib_logfile0", []byte("log "+d))     // each prepare writes its own
		write(t, d, "xtrabackup_checkpoints", []byte(d)) // not InnoDB
	}
	return a, b
}

func write(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// patch changes one byte of a file.
func patch(t *testing.T, dir, name string, off int64, v byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{v}, off); err != nil {
		t.Fatal(err)
	}
}

func mustDirs(t *testing.T, a, b string, opt Options) Report {
	t.Helper()
	r, err := Dirs(a, b, opt)
	if err != nil {
		t.Fatalf("Dirs: %v", err)
	}
	return r
}

// explainer is the engine's side: descriptions and freed pages.
type explainer struct{ freed map[[2]uint32]bool }

func (e explainer) Explain(space, page uint32) (string, bool) {
	return "WRITE at LSN 1000-1010", e.freed[[2]uint32{space, page}]
}

func TestEqualDirs(t *testing.T) {
	a, b := testDirs(t)
	r := mustDirs(t, a, b, Options{})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Files != 3 || r.Compared != 8+4+6 {
		t.Errorf("compared %d pages in %d files, want 18 in 3", r.Compared, r.Files)
	}
}

func TestFlippedByte(t *testing.T) {
	a, b := testDirs(t)
	patch(t, b, "db/t.ibd", 3*testPage+1000, 0xAB)
	r := mustDirs(t, a, b, Options{Explain: explainer{}})
	if len(r.Mismatches) != 1 {
		t.Fatalf("mismatches %v, want one", r.Mismatches)
	}
	m := r.Mismatches[0]
	want := Mismatch{File: "db/t.ibd", Space: 5, Page: 3, Offset: 1000, Oracle: 0, Native: 0xAB, Desc: "WRITE at LSN 1000-1010"}
	if m != want {
		t.Errorf("mismatch %+v, want %+v", m, want)
	}
	err := r.Err()
	if err == nil {
		t.Fatal("Err is nil with a mismatch")
	}
	for _, s := range []string{"db/t.ibd", "space 5 page 3", "byte 1000", "0xab", "WRITE at LSN 1000-1010"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q:\n%v", s, err)
		}
	}
}

func TestSystemTablespaceContinues(t *testing.T) {
	a, b := testDirs(t)
	for _, d := range []string{a, b} {
		write(t, d, "backup-my.cnf", []byte("[mysqld]\ninnodb_data_file_path=ibdata1:128K;ibdata2:64K:autoextend\n"))
		write(t, d, "ibdata2", tablespace(0, 4, fcrc32_16)[testPage:])
		patch(t, d, "ibdata1", 50+3, 8+3) // FSP_FREE_LIMIT: the pages of both files
	}
	patch(t, b, "ibdata2", testPage+7, 1)
	r := mustDirs(t, a, b, Options{})
	if len(r.Mismatches) != 1 || r.Mismatches[0].Page != 8+1 || r.Mismatches[0].Offset != 7 {
		t.Fatalf("mismatches %v, want page 9 byte 7 of ibdata2", r.Mismatches)
	}
}

func TestFreedPageIgnored(t *testing.T) {
	a, b := testDirs(t)
	patch(t, b, "db/t.ibd", 2*testPage+500, 0xFF)
	r := mustDirs(t, a, b, Options{Explain: explainer{freed: map[[2]uint32]bool{{5, 2}: true}}})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Ignored != 1 {
		t.Errorf("ignored %d pages, want 1", r.Ignored)
	}
}

// TestFreePageIgnored: a page both copies' extent descriptors mark free is not
// compared (a chain's page freed between two links' logs has no FREE_PAGE record);
// one marked free on one side only is, and so is the descriptor page that differs.
func TestFreePageIgnored(t *testing.T) {
	a, b := testDirs(t)
	for _, d := range []string{a, b} {
		patch(t, d, "db/t.ibd", xdes0+24, 0b010000) // XDES_FREE_BIT of page 2
	}
	patch(t, b, "db/t.ibd", 2*testPage+500, 0xFF)
	r := mustDirs(t, a, b, Options{Explain: explainer{}})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Ignored != 1 {
		t.Errorf("ignored %d pages, want 1", r.Ignored)
	}
	patch(t, b, "db/t.ibd", xdes0+24, 0) // page 2 in use on ferry's side
	r = mustDirs(t, a, b, Options{Explain: explainer{}})
	if len(r.Mismatches) != 2 || r.Mismatches[0].Page != 0 || r.Mismatches[1].Page != 2 || r.Ignored != 0 {
		t.Errorf("mismatches %v (ignored %d), want pages 0 and 2 of db/t.ibd", r.Mismatches, r.Ignored)
	}
}

func TestSystemFlushLSNIgnored(t *testing.T) {
	a, b := testDirs(t)
	patch(t, b, "ibdata1", 30, 0x42) // FIL_PAGE_FILE_FLUSH_LSN of page 0:0
	if err := mustDirs(t, a, b, Options{}).Err(); err != nil {
		t.Fatal(err)
	}
	patch(t, b, "undo001", 30, 0x42) // the same bytes elsewhere are content
	if r := mustDirs(t, a, b, Options{}); len(r.Mismatches) != 1 || r.Mismatches[0].File != "undo001" {
		t.Fatalf("mismatches %v, want undo001 page 0", r.Mismatches)
	}
}

func TestMissingFile(t *testing.T) {
	a, b := testDirs(t)
	os.Remove(filepath.Join(b, "db/t.ibd"))
	write(t, b, "db/new.ibd", tablespace(9, 4, fcrc32_16))
	r := mustDirs(t, a, b, Options{})
	if len(r.Mismatches) != 2 {
		t.Fatalf("mismatches %v, want two", r.Mismatches)
	}
	err := r.Err()
	for _, s := range []string{"db/t.ibd: only in the directory the server prepared", "db/new.ibd: only in the directory ferry prepared"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q:\n%v", s, err)
		}
	}
}

func TestLengthApart(t *testing.T) {
	a, b := testDirs(t)
	write(t, b, "db/t.ibd", append(tablespace(5, 6, fcrc32_16), make([]byte, 2*testPage)...))
	r := mustDirs(t, a, b, Options{})
	if len(r.Mismatches) != 0 || len(r.Lengths) != 1 {
		t.Fatalf("mismatches %v, lengths %v; want one length only", r.Mismatches, r.Lengths)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "db/t.ibd: length 98304 bytes after the server's recovery, 131072 after ferry's") {
		t.Errorf("error: %v", err)
	}
}

// encrypt marks page i of a full_crc32 file encrypted by key version v (bytes 0..3)
// and "encrypts" its body by XOR, so that only a decoder can compare it.
func encrypt(t *testing.T, dir, name string, i int, v uint32) {
	t.Helper()
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := b[i*testPage : (i+1)*testPage]
	binary.BigEndian.PutUint32(p, v)
	for j := 38; j < testPage-4; j++ {
		p[j] ^= byte(v)
	}
	binary.BigEndian.PutUint32(p[testPage-4:], v*7) // post-encryption checksum
	write(t, dir, name, b)
}

// xorDecode undoes encrypt; it keeps the key version and checksum, as a decoder may.
func xorDecode(_ uint32, _ uint32, flags innodb.SpaceFlags, raw []byte) ([]byte, error) {
	p := append([]byte(nil), raw...)
	v := byte(binary.BigEndian.Uint32(p))
	for j := 38; j < flags.PageSize()-4; j++ {
		p[j] ^= v
	}
	return p, nil
}

func TestEncryptedPages(t *testing.T) {
	a, b := testDirs(t)
	patch(t, a, "db/t.ibd", 4*testPage+3, 0x33) // a key version without encryption metadata: plain
	if r := mustDirs(t, a, b, Options{Decode: xorDecode}); len(r.Mismatches) != 1 || r.Mismatches[0].Offset != 3 || r.Decoded != 0 {
		t.Fatalf("a plain page decoded (%d) or its difference missed: %v", r.Decoded, r.Mismatches)
	}
	patch(t, a, "db/t.ibd", 4*testPage+3, 0)
	for _, d := range []string{a, b} {
		patch(t, d, "db/t.ibd", cryptMagic16k, 0x73) // CRYPT_MAGIC on page 0
		for i, c := range []byte{0x0E, 0x0C, 0x52, 0x45, 0x74} {
			patch(t, d, "db/t.ibd", cryptMagic16k+1+int64(i), c)
		}
	}
	encrypt(t, a, "db/t.ibd", 4, 3)
	encrypt(t, b, "db/t.ibd", 4, 4) // flushed under a later key version: same plaintext
	r := mustDirs(t, a, b, Options{})
	if len(r.Mismatches) != 1 || !r.Mismatches[0].Undecoded || r.Undecoded != 1 {
		t.Fatalf("without a decoder: mismatches %v, want one undecoded", r.Mismatches)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "compared raw") {
		t.Errorf("error does not say the page was compared raw: %v", err)
	}
	r = mustDirs(t, a, b, Options{Decode: xorDecode})
	if err := r.Err(); err != nil {
		t.Fatalf("key version and post-encryption checksum are not ignored: %v", err)
	}
	if r.Decoded != 1 {
		t.Errorf("decoded %d pages, want 1", r.Decoded)
	}
	patch(t, b, "db/t.ibd", 4*testPage+200, 0x5A)
	r = mustDirs(t, a, b, Options{Decode: xorDecode})
	if len(r.Mismatches) != 1 || r.Mismatches[0].Offset != 200 || r.Mismatches[0].Undecoded {
		t.Fatalf("decoded plaintext difference: mismatches %v, want page 4 byte 200", r.Mismatches)
	}
}

func TestMaxMismatches(t *testing.T) {
	a, b := testDirs(t)
	for i := 0; i < 6; i++ {
		patch(t, b, "db/t.ibd", int64(i*testPage+100), 0x77)
	}
	r := mustDirs(t, a, b, Options{MaxMismatches: 2})
	if len(r.Mismatches) != 2 || r.MoreMismatches != 4 {
		t.Fatalf("listed %d, more %d; want 2 and 4", len(r.Mismatches), r.MoreMismatches)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "6 mismatching pages") {
		t.Errorf("error: %v", err)
	}
}

// TestIgnoresDocumented keeps docs/redo-apply.md's list equal to Ignores.
func TestIgnoresDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/redo-apply.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	_, sect, ok := strings.Cut(doc, "What the differential check ignores")
	if !ok {
		t.Fatal(`docs/redo-apply.md has no section "What the differential check ignores"`)
	}
	for _, ig := range Ignores() {
		for _, s := range []string{ig.What, ig.Reason} {
			if !strings.Contains(sect, s) {
				t.Errorf("docs/redo-apply.md does not list %q", s)
			}
		}
	}
}

// TestPageCompressedDecoded: a page_compressed page written by the two sides with
// different compression levels (different streams, the same page) differs raw and is
// equal decoded; a change inside the page is found at its offset in the plain page.
func TestPageCompressedDecoded(t *testing.T) {
	const pcFlags = fcrc32_16 | 1<<5 // full_crc32, page_compressed with zlib
	a, b := testDirs(t)
	for _, d := range []string{a, b} {
		write(t, d, "db/pc.ibd", tablespace(7, 4, pcFlags))
	}
	compress := func(dir string, level int, flip bool) {
		t.Helper()
		f := tablespace(7, 4, pcFlags)
		plain := append([]byte(nil), f[2*testPage:3*testPage]...)
		for j := 100; j < 8000; j++ {
			plain[j] = byte(j % 7) // compressible
		}
		if flip {
			plain[5000] ^= 0x10
		}
		dst := make([]byte, testPage)
		n, err := innodb.CompressPage(dst, plain, innodb.SpaceFlags(pcFlags), 7, 2, innodb.CompressOptions{Level: level})
		if err != nil || n == 0 {
			t.Fatalf("compress: %d bytes, %v", n, err)
		}
		copy(f[2*testPage:], dst)
		write(t, dir, "db/pc.ibd", f)
	}
	compress(a, 6, false)
	compress(b, 1, false)
	r := mustDirs(t, a, b, Options{})
	if len(r.Mismatches) != 1 || !r.Mismatches[0].Undecoded {
		t.Fatalf("compressed at two levels, no decoder: mismatches %v, want one undecoded", r.Mismatches)
	}
	decode, err := CodecDecoder(a, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if r := mustDirs(t, a, b, Options{Decode: decode}); r.Err() != nil || r.Decoded != 1 {
		t.Fatalf("decoded %d pages: %v", r.Decoded, r.Err())
	}
	compress(b, 1, true)
	r = mustDirs(t, a, b, Options{Decode: decode})
	if len(r.Mismatches) != 1 || r.Mismatches[0].Offset != 5000 || r.Mismatches[0].Page != 2 {
		t.Fatalf("a changed byte in a compressed page: mismatches %v, want page 2 byte 5000", r.Mismatches)
	}
}
