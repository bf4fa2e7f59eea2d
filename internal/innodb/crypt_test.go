package innodb

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// Flags of the tablespaces the unit tests build: 16 KiB pages, full_crc32 without and
// with page_compressed zlib, legacy without and with page_compressed.
const (
	flagsFCRC32   = SpaceFlags(fcrc32Marker | 5)
	flagsFCRC32PC = SpaceFlags(fcrc32Marker | 5 | uint32(AlgoZlib)<<fcrc32AlgoShift)
	flagsLegacy   = SpaceFlags(0x21)
	flagsLegacyPC = SpaceFlags(0x21 | legacyPageComp)
)

// testPage returns an index page pageNo of space 7 at lsn, its body compressible,
// finished as the server writes it in the format and page size of flags.
func testPage(flags SpaceFlags, pageNo uint32, lsn uint64, seed uint64) []byte {
	p := make([]byte, flags.PageSize())
	r := rand.New(rand.NewPCG(seed, 1))
	for i := offData; i < len(p)-trailerLen; i++ {
		p[i] = byte('a' + r.IntN(4))
	}
	binary.BigEndian.PutUint32(p[offPageNo:], pageNo)
	binary.BigEndian.PutUint64(p[offLSN:], lsn)
	binary.BigEndian.PutUint16(p[offType:], 17855)
	binary.BigEndian.PutUint32(p[offSpaceID:], 7)
	SealPage(p, 7, pageNo, flags, lsn)
	return p
}

func testKeys(id, version uint32) ([]byte, error) {
	if version != 1 && version != 2 {
		return nil, errors.New("no such key")
	}
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i) ^ byte(id) ^ byte(version<<4)
	}
	return k, nil
}

func testCrypt(t *testing.T, flags SpaceFlags, algorithm string) *PageCrypt {
	t.Helper()
	d := &CryptData{Scheme: CryptScheme1, KeyID: 3, Mode: EncryptionOn}
	copy(d.IV[:], "0123456789abcdef")
	c, err := NewPageCrypt(7, flags, d, testKeys, algorithm)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCryptRoundTrip: in both formats and both modes, with and without page
// compression, EncryptPage then DecryptPage gives back the page as stored unencrypted
// (Checker accepts it), the encrypted image passes the server's post-encryption
// checksum and depends on the key version, and another key is refused.
func TestCryptRoundTrip(t *testing.T) {
	for _, flags := range []SpaceFlags{flagsFCRC32, flagsFCRC32PC, flagsLegacy, flagsLegacyPC} {
		for _, algo := range []string{"aes_cbc", "aes_ctr"} {
			c := testCrypt(t, flags, algo)
			plain := testPage(flags, 9, 0x1122334455, 1)
			if flags.PageCompressed() {
				comp := make([]byte, len(plain))
				if n, err := CompressPage(comp, plain, flags, 7, 9, CompressOptions{Encrypted: true}); err != nil || n == 0 {
					t.Fatalf("%#x: compress: %d %v", flags, n, err)
				}
				plain = comp
			}
			enc := make([]byte, len(plain))
			if err := c.EncryptPage(enc, plain, 9, 2); err != nil {
				t.Fatal(err)
			}
			if !c.Encrypted(enc, 9) || c.KeyVersion(enc) != 2 {
				t.Fatalf("%#x %s: encrypted page has key version %d", flags, algo, c.KeyVersion(enc))
			}
			if err := NewChecker(SpaceHeader{Flags: flags, CryptData: true}, false).Check(enc, 9); err != nil {
				t.Errorf("%#x %s: Checker refuses the encrypted page: %v", flags, algo, err)
			}
			dec := make([]byte, len(enc))
			if ok, err := c.DecryptPage(dec, enc, 9); !ok || err != nil {
				t.Fatalf("%#x %s: decrypt: %v %v", flags, algo, ok, err)
			}
			want := append([]byte(nil), plain...)
			c.clearCryptFields(want, mustSpan(t, c, want))
			if i := firstDiff(dec, want); i >= 0 {
				t.Errorf("%#x %s: decrypted page differs at byte %d", flags, algo, i)
			}
			if ok, err := c.DecryptPage(enc, enc, 9); !ok || err != nil || firstDiff(enc, want) >= 0 {
				t.Errorf("%#x %s: in-place decrypt: %v %v", flags, algo, ok, err)
			}
			other := testCrypt(t, flags, algo)
			other.data.IV[0] ^= 1
			c.EncryptPage(enc, plain, 9, 1)
			if !flags.PageCompressed() {
				stored := append([]byte(nil), enc...)
				if _, err := other.DecryptPage(enc, enc, 9); !errors.Is(err, ErrDecrypt) {
					t.Errorf("%#x %s: another key decrypts the page: %v", flags, algo, err)
				}
				if firstDiff(enc, stored) >= 0 {
					t.Errorf("%#x %s: a failed in-place decryption changed the page", flags, algo)
				}
			}
		}
	}
}

func mustSpan(t *testing.T, c *PageCrypt, p []byte) int {
	_, hi, err := c.span(p)
	if err != nil {
		t.Fatal(err)
	}
	return hi
}

// TestCryptSkips: page 0, the system tablespace's TRX_SYS page, FSP_HDR/XDES pages
// and legacy R-tree pages are never encrypted, and a page without key version is not
// decrypted.
func TestCryptSkips(t *testing.T) {
	c := testCrypt(t, flagsLegacy, "aes_cbc")
	p := testPage(flagsLegacy, 0, 100, 2)
	if c.Encrypts(p, 0) {
		t.Error("page 0 would be encrypted")
	}
	for _, typ := range []uint16{typeFSPHdr, typeXDES, typeRTree} {
		binary.BigEndian.PutUint16(p[offType:], typ)
		out := make([]byte, len(p))
		if err := c.EncryptPage(out, p, 3, 1); err != nil || firstDiff(out, p) >= 0 {
			t.Errorf("type %d: encrypted (%v)", typ, err)
		}
	}
	if !testCrypt(t, flagsFCRC32, "aes_cbc").Encrypts(p, 3) {
		t.Error("full_crc32 R-tree pages are encrypted")
	}
	sys, _ := NewPageCrypt(0, flagsFCRC32, &CryptData{Scheme: CryptScheme1}, testKeys, "")
	if sys.Encrypts(testPage(flagsFCRC32, 5, 1, 3), 5) {
		t.Error("TRX_SYS would be encrypted")
	}
	plain := testPage(flagsLegacy, 4, 100, 4)
	if ok, err := c.DecryptPage(make([]byte, len(plain)), plain, 4); ok || err != nil {
		t.Errorf("a page without key version was decrypted: %v", err)
	}
}

// TestCryptBadInput: sizes read from a damaged page are bounded: errors, no panic.
func TestCryptBadInput(t *testing.T) {
	for _, flags := range []SpaceFlags{flagsFCRC32PC, flagsLegacyPC} {
		c := testCrypt(t, flags, "aes_ctr")
		r := rand.New(rand.NewPCG(5, 5))
		for i := 0; i < 2000; i++ {
			p := make([]byte, 16384)
			for j := 0; j < 64; j++ {
				p[j] = byte(r.Uint32())
			}
			binary.BigEndian.PutUint32(p[offPageNo:], 3)
			if i%2 == 0 {
				binary.BigEndian.PutUint16(p[offType:], typePageCompressedEncrypted)
			}
			c.DecryptPage(make([]byte, len(p)), p, 3)
			DecompressPage(make([]byte, len(p)), p, flags)
		}
	}
	c := testCrypt(t, flagsFCRC32, "aes_cbc")
	if _, err := c.DecryptPage(make([]byte, 100), make([]byte, 100), 1); err == nil {
		t.Error("a short page was accepted")
	}
}

// TestParseCryptData reads the metadata where the server writes it on page 0.
func TestParseCryptData(t *testing.T) {
	p := make([]byte, 16384)
	binary.BigEndian.PutUint32(p[offFSPFlags:], uint32(flagsFCRC32))
	if d, err := ParseCryptData(p); d != nil || err != nil {
		t.Fatalf("no metadata: %v %v", d, err)
	}
	off := cryptOffset(flagsFCRC32)
	b := append(append([]byte{}, cryptMagic...), 1, 16)
	b = append(b, "0123456789abcdef"...)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, 5)
	b = append(b, byte(EncryptionOn))
	copy(p[off:], b)
	d, err := ParseCryptData(p)
	if err != nil || d.KeyID != 5 || d.MinKeyVersion != 1 || d.Mode != EncryptionOn || string(d.IV[:]) != "0123456789abcdef" {
		t.Fatalf("got %+v %v", d, err)
	}
	if !d.EncryptsPages(false) || (&CryptData{Scheme: CryptScheme1}).EncryptsPages(false) {
		t.Error("EncryptsPages does not follow ENCRYPTED= and innodb_encrypt_tables")
	}
	p[off+7] = 15
	if _, err := ParseCryptData(p); err == nil {
		t.Error("an IV length of 15 was accepted")
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
