//go:build e2e

package innodb

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// codecTables are the tables TestPageCodecServer creates: every combination of
// encryption and page_compressed the server writes, in the full_crc32 format and
// (after innodb_checksum_algorithm=crc32) the legacy one, plus encrypted
// ROW_FORMAT=COMPRESSED, and lz4/snappy page_compressed tables when the server has
// those provider plugins.
type codecTable struct{ name, options string }

// TestPageCodecServer checks the page codec against a real server. A server with
// file_key_management (aes_cbc and 16 KiB pages, then aes_ctr and 4 KiB) writes a few pages of
// each table of codecTables and stops cleanly; then for every page of every table:
// an encrypted page decrypts to a page that validates (Checker, and for index pages
// the infimum record where it must be), EncryptPage gives back the stored bytes
// exactly (same key version and LSN), a page_compressed page decompresses to a valid
// page, and CompressPage then DecompressPage gives the same page back. Every page is
// then rewritten through ferry's own path (decrypt, decompress, compress, encrypt) into
// the datadir, and the server, started on it, reads every table: CHECK TABLE is OK,
// CHECKSUM TABLE is unchanged, and its error log names no corrupt page.
func TestPageCodecServer(t *testing.T) {
	t.Run("aes_cbc 16k", func(t *testing.T) { pageCodecRound(t, "aes_cbc", "16k", 8) })
	t.Run("aes_ctr 4k", func(t *testing.T) { pageCodecRound(t, "aes_ctr", "4k", 2) })
}

// pageCodecRound runs TestPageCodecServer with one encryption algorithm, page size
// and ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE.
func pageCodecRound(t *testing.T, algorithm, pageSize string, keyBlockSize int) {
	keyPath := writeKeyFile(t)
	args := []string{"--plugin-load-add=file_key_management", "--file-key-management-filename=" + keyPath,
		"--file-key-management-encryption-algorithm=" + algorithm, "--innodb-page-size=" + pageSize}
	tables := []codecTable{
		{"enc", "ENCRYPTED=YES"},
		{"enc_k2", "ENCRYPTED=YES ENCRYPTION_KEY_ID=2"},
		{"enc_pc", "ENCRYPTED=YES PAGE_COMPRESSED=1"},
		{"pc", "PAGE_COMPRESSED=1"},
	}
	var providers []string
	for _, p := range []string{"lz4", "snappy", "bzip2", "lzma", "lzo"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/mysql/plugin", "provider_"+p+".so")); err == nil {
			providers = append(providers, p)
			args = append(args, "--plugin-load-add=provider_"+p)
		}
	}
	s := testdb.Start(t, testdb.Options{ServerID: 1, Args: args})
	s.Exec(t, "CREATE DATABASE fx")
	create := func(tb codecTable) {
		s.Exec(t, "CREATE TABLE fx."+tb.name+" (id INT PRIMARY KEY, v VARCHAR(400)) ENGINE=InnoDB "+tb.options)
		s.Exec(t, "INSERT INTO fx."+tb.name+" SELECT seq, CONCAT(seq, REPEAT(MD5(seq), 1 + seq % 7)) FROM fx.seq_1_to_3000")
	}
	for _, tb := range tables {
		create(tb)
	}
	for _, p := range providers {
		s.Exec(t, "SET GLOBAL innodb_compression_algorithm="+p)
		tb := codecTable{"pc_" + p, "PAGE_COMPRESSED=1"}
		create(tb)
		tables = append(tables, tb)
	}
	s.Exec(t, "SET GLOBAL innodb_compression_algorithm=zlib")
	s.Exec(t, "SET GLOBAL innodb_checksum_algorithm=crc32") // new tablespaces: the legacy format
	for _, tb := range []codecTable{
		{"l_enc", "ENCRYPTED=YES"},
		{"l_enc_pc", "ENCRYPTED=YES PAGE_COMPRESSED=1"},
		{"l_pc", "PAGE_COMPRESSED=1"},
		{"l_zip_enc", fmt.Sprintf("ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=%d ENCRYPTED=YES", keyBlockSize)},
	} {
		create(tb)
		tables = append(tables, tb)
	}
	sums := map[string]string{}
	for _, tb := range tables {
		sums[tb.name] = checksumTable(t, s, tb.name)
	}
	s.Stop(t)

	keys, err := keyfile.Load(keyPath, "")
	if err != nil {
		t.Fatal(err)
	}
	var st codecStats
	for _, tb := range tables {
		path := filepath.Join(s.Datadir, "fx", tb.name+".ibd")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := st.file(t, tb.name, b, keys.Key, algorithm)
		if err := os.WriteFile(path, out, 0o660); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%+v", st)
	if st.decrypted == 0 || st.decompressed == 0 || st.recompressed == 0 || st.legacyDecompressed == 0 || st.legacyDecrypted == 0 {
		t.Errorf("the tables did not exercise every path: %+v", st)
	}

	s.Restart(t)
	for _, tb := range tables {
		checkTable(t, s, tb.name)
		if got := checksumTable(t, s, tb.name); got != sums[tb.name] {
			t.Errorf("fx.%s: CHECKSUM TABLE %s after ferry rewrote its pages, was %s", tb.name, got, sums[tb.name])
		}
	}
	s.Stop(t)
	log, _ := os.ReadFile(s.ErrorLog)
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "[ERROR]") && (strings.Contains(l, "page") || strings.Contains(l, "corrupt")) {
			t.Errorf("server error log: %s", l)
		}
	}
}

type codecStats struct {
	pages, decrypted, legacyDecrypted, decompressed, legacyDecompressed, recompressed, storedPlain, unsupported int
}

// unsupported are the algorithms DecompressPage refuses with ErrAlgorithm.
var unsupported = map[PageAlgorithm]bool{AlgoLZO: true}

// file checks every page of one tablespace file b and returns the file with every
// page rewritten through DecryptPage, DecompressPage, CompressPage and EncryptPage.
func (st *codecStats) file(t *testing.T, name string, b []byte, keys KeyFunc, algorithm string) []byte {
	t.Helper()
	h, err := ParseSpaceHeader(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	cd, err := ParseCryptData(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var pc *PageCrypt
	if cd != nil {
		if pc, err = NewPageCrypt(h.SpaceID, h.Flags, cd, keys, algorithm); err != nil {
			t.Fatal(err)
		}
	}
	codec := &SpaceCodec{SpaceID: h.SpaceID, Flags: h.Flags, Crypt: pc, Encrypt: cd.EncryptsPages(false), KeyVersion: 1}
	plainHeader := h
	plainHeader.CryptData = false
	check := NewChecker(plainHeader, false)
	ps := h.Flags.PhysicalSize()
	out := make([]byte, len(b))
	for i := 0; i+ps <= len(b); i += ps {
		no := uint32(i / ps)
		st.pages++
		copy(out[i:i+ps], st.page(t, name, b[i:i+ps], no, h, codec, check))
	}
	return out
}

// page checks one stored page and returns it as ferry rewrites it.
func (st *codecStats) page(t *testing.T, name string, stored []byte, no uint32, h SpaceHeader, codec *SpaceCodec, check *Checker) []byte {
	t.Helper()
	plain := st.decrypt(t, name, stored, no, codec.Crypt)
	if err := check.Check(plain, no); err != nil && !PageCompressed(plain, h.Flags) {
		// (a decrypted legacy page_compressed page of type 37401 is checked by its stream)
		t.Errorf("%s: stored page, decrypted: %v", name, err)
	}
	if IsZero(plain) || no == 0 || h.Flags.ZipSize() != 0 {
		return stored // nothing more to do: never compressed, and re-encryption was checked
	}
	page := make([]byte, len(stored))
	compressed, err := DecompressPage(page, plain, h.Flags)
	if errors.Is(err, ErrAlgorithm) && unsupported[h.Flags.PageAlgorithm()] {
		st.unsupported++
		return stored // the apply falls back to the server for such a tablespace
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if compressed {
		st.decompressed++
		if !h.Flags.FullCRC32() {
			st.legacyDecompressed++
		}
	}
	if err := check.Check(page, no); err != nil {
		t.Errorf("%s: decompressed: %v", name, err)
	}
	if PageType(page) == 17855 && !bytes.Equal(page[99:106], []byte("infimum")) {
		t.Errorf("%s page %d: index page without its infimum record after decoding", name, no)
	}
	st.recompress(t, name, page, no, h)
	return rewrite(t, name, stored, page, no, codec)
}

// decrypt returns the plain form of an encrypted page, checking that EncryptPage
// gives the stored bytes back, or a copy of a page that is not encrypted.
func (st *codecStats) decrypt(t *testing.T, name string, stored []byte, no uint32, pc *PageCrypt) []byte {
	t.Helper()
	plain := append([]byte(nil), stored...)
	if pc == nil || !pc.Encrypted(stored, no) {
		return plain
	}
	if _, err := pc.DecryptPage(plain, stored, no); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	st.decrypted++
	if !pc.flags.FullCRC32() {
		st.legacyDecrypted++
	}
	again := make([]byte, len(stored))
	if err := pc.EncryptPage(again, plain, no, pc.KeyVersion(stored)); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(again, stored); i >= 0 {
		t.Errorf("%s page %d: EncryptPage(DecryptPage(p)) differs from p at byte %d", name, no, i)
	}
	return plain
}

// recompress checks that CompressPage then DecompressPage gives page back.
func (st *codecStats) recompress(t *testing.T, name string, page []byte, no uint32, h SpaceHeader) {
	t.Helper()
	comp := make([]byte, len(page))
	n, err := CompressPage(comp, page, h.Flags, h.SpaceID, no, CompressOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		st.storedPlain++
		return
	}
	st.recompressed++
	back := make([]byte, len(page))
	if ok, err := DecompressPage(back, comp, h.Flags); err != nil || !ok {
		t.Fatalf("%s page %d: DecompressPage(CompressPage(p)): %v %v", name, no, ok, err)
	}
	if i := firstDiff(back, page); i >= 0 {
		t.Errorf("%s page %d: DecompressPage(CompressPage(p)) differs at byte %d", name, no, i)
	}
}

// rewrite returns page as ferry writes it (SpaceCodec.Encode: compressed, then
// encrypted with the same key version), checking that Decode reads both the stored
// page and the rewritten one as page, and that a page stored uncompressed that stays
// so is rewritten byte for byte.
func rewrite(t *testing.T, name string, stored, page []byte, no uint32, codec *SpaceCodec) []byte {
	t.Helper()
	out := make([]byte, len(page))
	n, err := codec.Encode(out, page, no)
	if err != nil {
		t.Fatal(err)
	}
	sameKey := codec.Crypt == nil || !codec.Crypt.Encrypted(stored, no) || codec.Crypt.KeyVersion(stored) == codec.KeyVersion
	if n == len(page) && !PageCompressed(stored, codec.Flags) && sameKey {
		if i := firstDiff(out, stored); i >= 0 {
			t.Errorf("%s page %d: Encode of a page stored uncompressed differs from the stored bytes at %d", name, no, i)
		}
	}
	for _, in := range [][]byte{stored, out} {
		dec := make([]byte, len(page))
		if _, err := codec.Decode(dec, in, no); err != nil {
			t.Fatalf("%s page %d: Decode: %v", name, no, err)
		}
		if i := firstDiff(dec, page); i >= 0 {
			t.Errorf("%s page %d: Decode differs from DecryptPage+DecompressPage at byte %d", name, no, i)
		}
	}
	return out
}

// writeKeyFile writes a file_key_management key file with keys 1 and 2.
func writeKeyFile(t *testing.T) string {
	var k [64]byte
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys.txt")
	text := "1;" + hex.EncodeToString(k[:32]) + "\n2;" + hex.EncodeToString(k[32:]) + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func checksumTable(t *testing.T, s *testdb.Server, table string) string {
	var name, sum string
	if err := s.DB(t).QueryRow("CHECKSUM TABLE fx."+table).Scan(&name, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

func checkTable(t *testing.T, s *testdb.Server, table string) {
	rows, err := s.DB(t).Query("CHECK TABLE fx." + table + " EXTENDED")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var tbl, op, typ, msg string
		if err := rows.Scan(&tbl, &op, &typ, &msg); err != nil {
			t.Fatal(err)
		}
		if typ == "error" || (typ == "status" && msg != "OK") {
			t.Errorf("CHECK TABLE %s: %s %s", tbl, typ, msg)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
