package innodb

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ferry-backup/ferry/internal/aesnopad"
)

// Encryption metadata on page 0 (fil_space_crypt_t, fil0crypt.cc): after the 6-byte
// magic come the scheme type (1 byte), the IV length (1 byte, always 16), the IV, the
// minimum key version (4), the key id (4) and the encryption mode (1).
const (
	cryptIVLen   = 16
	cryptDataLen = 6 + 2 + cryptIVLen + 4 + 4 + 1
)

// CryptScheme is the type byte of the encryption metadata.
type CryptScheme uint8

// Schemes: CRYPT_SCHEME_UNENCRYPTED (the metadata exists but pages are written in the
// clear) and CRYPT_SCHEME_1 (pages are encrypted).
const (
	CryptSchemeUnencrypted CryptScheme = 0
	CryptScheme1           CryptScheme = 1
)

// EncryptionMode is the table's ENCRYPTED= attribute as page 0 records it
// (fil_encryption_t).
type EncryptionMode uint8

// Modes: DEFAULT follows innodb_encrypt_tables, ON and OFF are ENCRYPTED=YES and NO.
const (
	EncryptionDefault EncryptionMode = 0
	EncryptionOn      EncryptionMode = 1
	EncryptionOff     EncryptionMode = 2
)

// CryptData is the encryption metadata a tablespace keeps on page 0.
type CryptData struct {
	Scheme        CryptScheme
	IV            [cryptIVLen]byte // the tablespace's IV; the page key is it encrypted with the plugin's key
	MinKeyVersion uint32           // the oldest key version any page may still use
	KeyID         uint32           // ENCRYPTION_KEY_ID
	Mode          EncryptionMode
}

// ParseCryptData reads the encryption metadata of page 0 (at least the first
// physical page of the tablespace). It returns nil and no error for a tablespace that
// has none.
func ParseCryptData(page0 []byte) (*CryptData, error) {
	h, err := ParseSpaceHeader(page0)
	if err != nil {
		return nil, err
	}
	off := cryptOffset(h.Flags)
	if !h.CryptData {
		return nil, nil
	}
	if len(page0) < off+cryptDataLen {
		return nil, fmt.Errorf("innodb: space %d: page 0 too short for its encryption metadata", h.SpaceID)
	}
	b := page0[off+len(cryptMagic):]
	d := &CryptData{Scheme: CryptScheme(b[0])}
	if d.Scheme > CryptScheme1 || b[1] != cryptIVLen {
		return nil, fmt.Errorf("innodb: space %d: encryption metadata with scheme %d and IV length %d, want scheme 0 or 1 and 16",
			h.SpaceID, b[0], b[1])
	}
	copy(d.IV[:], b[2:])
	d.MinKeyVersion = binary.BigEndian.Uint32(b[2+cryptIVLen:])
	d.KeyID = binary.BigEndian.Uint32(b[6+cryptIVLen:])
	d.Mode = EncryptionMode(b[10+cryptIVLen])
	if d.Mode > EncryptionOff {
		return nil, fmt.Errorf("innodb: space %d: encryption mode %d unknown", h.SpaceID, d.Mode)
	}
	return d, nil
}

// EncryptsPages reports whether the server writes this tablespace's pages encrypted
// (buf_page_encrypt): scheme 1, not ENCRYPTED=NO, and for ENCRYPTED=DEFAULT only when
// encryptTables (innodb_encrypt_tables) is on. Reading does not depend on it: a page
// with a key version is decrypted whenever the metadata exists.
func (d *CryptData) EncryptsPages(encryptTables bool) bool {
	return d != nil && d.Scheme == CryptScheme1 && d.Mode != EncryptionOff &&
		(d.Mode != EncryptionDefault || encryptTables)
}

// KeyFunc returns the key management plugin's key with an id and version
// ((*keyfile.Keys).Key is one).
type KeyFunc func(id, version uint32) ([]byte, error)

// PageCrypt decrypts and encrypts the pages of one tablespace as the server does with
// data-at-rest encryption (fil0crypt.cc). Each key version's page key is the
// tablespace IV encrypted (AES-ECB) with the plugin's key of that id and version, used
// as an AES-128 key; the IV of a page is its space id and page number (4 bytes each)
// and FIL_PAGE_LSN (8 bytes), little-endian. The mode is the plugin's algorithm: CTR,
// or CBC whose final partial block is XORed with the IV encrypted (MariaDB's no-padding
// rule). A PageCrypt is safe for concurrent use.
type PageCrypt struct {
	spaceID uint32
	flags   SpaceFlags
	data    CryptData
	keys    KeyFunc
	ctr     bool

	mu     sync.Mutex
	blocks map[uint32]cipher.Block // page key by key version
}

// NewPageCrypt returns the PageCrypt of tablespace spaceID with flags and the
// metadata d of its page 0; algorithm is file_key_management_encryption_algorithm
// (aes_cbc, the plugin's default, or aes_ctr).
func NewPageCrypt(spaceID uint32, flags SpaceFlags, d *CryptData, keys KeyFunc, algorithm string) (*PageCrypt, error) {
	if d == nil {
		return nil, fmt.Errorf("innodb: space %d has no encryption metadata", spaceID)
	}
	if keys == nil {
		return nil, fmt.Errorf("innodb: space %d is encrypted: the key file is needed", spaceID)
	}
	c := &PageCrypt{spaceID: spaceID, flags: flags, data: *d, keys: keys, blocks: map[uint32]cipher.Block{}}
	switch strings.ToLower(algorithm) {
	case "aes_cbc", "":
	case "aes_ctr":
		c.ctr = true
	default:
		return nil, fmt.Errorf("innodb: page encryption algorithm %q: want aes_cbc or aes_ctr", algorithm)
	}
	return c, nil
}

// Page types the server never encrypts (fil_space_encrypt_valid_page_type).
const (
	typeAllocated = 0     // FIL_PAGE_TYPE_ALLOCATED
	typeFSPHdr    = 8     // FIL_PAGE_TYPE_FSP_HDR
	typeXDES      = 9     // FIL_PAGE_TYPE_XDES
	typeRTree     = 17854 // FIL_PAGE_RTREE
	trxSysPage    = 5     // TRX_SYS_PAGE_NO, in the system tablespace
)

// neverTransformed reports whether page pageNo of space spaceID is one the server
// never encrypts nor compresses: page 0 of every tablespace and TRX_SYS (0:5).
func neverTransformed(spaceID, pageNo uint32) bool {
	return pageNo == 0 || (spaceID == 0 && pageNo == trxSysPage)
}

// KeyVersion returns the key version a page as stored carries: bytes 0..3 in the
// full_crc32 format, 26..29 in the legacy one; 0 means not encrypted.
func (c *PageCrypt) KeyVersion(page []byte) uint32 {
	if c.flags.FullCRC32() {
		return be32(page, offChecksum)
	}
	return be32(page, offKeyVersion)
}

// Encrypted reports whether page, read at page number pageNo, is encrypted: it has a
// key version and is not page 0 or the system tablespace's TRX_SYS page.
func (c *PageCrypt) Encrypted(page []byte, pageNo uint32) bool {
	return !neverTransformed(c.spaceID, pageNo) && len(page) > offData && c.KeyVersion(page) != 0
}

// Encrypts reports whether EncryptPage encrypts plain (page pageNo): not page 0 or
// 0:5, not an FSP_HDR or XDES page, and in the legacy format not an R-tree page.
func (c *PageCrypt) Encrypts(plain []byte, pageNo uint32) bool {
	if neverTransformed(c.spaceID, pageNo) {
		return false
	}
	switch PageType(plain) {
	case typeFSPHdr, typeXDES:
		return false
	case typeRTree:
		return c.flags.FullCRC32()
	}
	return true
}

// ErrDecrypt means a page does not decrypt: its post-encryption checksum does not
// match (torn or damaged), or the plaintext does not validate (another key).
var ErrDecrypt = errors.New("page does not decrypt")

// DecryptPage decrypts src, page pageNo as read from the file, into dst (len(dst) ==
// len(src) == the physical page size; dst may be src). It returns false and copies src
// if the page is not encrypted. It checks the checksum stored after encryption first
// (full_crc32: CRC-32C at the end of the payload; legacy: bytes 30..33) and fails with
// an error wrapping ErrDecrypt if it does not match, or if the plaintext does not
// validate (a wrong key); dst then holds src's bytes.
//
// The result is the page as the server would store it unencrypted, so that Checker
// validates it: a page_compressed one stays compressed (DecompressPage is next); the
// key version is zeroed (bytes 0..3 in full_crc32, 26..33 in the legacy format) and in
// full_crc32 the CRC-32C of the plaintext replaces the encrypted image's. Those are
// the fields the server rewrites when it writes the page.
func (c *PageCrypt) DecryptPage(dst, src []byte, pageNo uint32) (bool, error) {
	if len(dst) != len(src) || len(src) != c.flags.PhysicalSize() {
		return false, fmt.Errorf("innodb: decrypt page %d: got %d and %d bytes, page size is %d",
			pageNo, len(dst), len(src), c.flags.PhysicalSize())
	}
	if !c.Encrypted(src, pageNo) {
		copy(dst, src)
		return false, nil
	}
	lo, hi, err := c.span(src)
	if err != nil {
		return false, fmt.Errorf("innodb: decrypt page %d: %w", pageNo, err)
	}
	if !c.cryptSumOK(src, hi) {
		return false, fmt.Errorf("innodb: decrypt page %d: post-encryption checksum mismatch: %w", pageNo, ErrDecrypt)
	}
	block, err := c.pageKey(c.KeyVersion(src))
	if err != nil {
		return false, fmt.Errorf("innodb: decrypt page %d: %w", pageNo, err)
	}
	iv := pageIV(c.ivSpaceID(src), PageNo(src), PageLSN(src))
	if &dst[0] != &src[0] {
		copy(dst, src)
	}
	c.transform(block, dst[lo:hi], iv, false)
	if reason := c.plainCheck(dst); reason != "" {
		c.transform(block, dst[lo:hi], iv, true) // back to the stored bytes, also in place
		return false, fmt.Errorf("innodb: decrypt page %d: %s (is it the right key?): %w", pageNo, reason, ErrDecrypt)
	}
	c.clearCryptFields(dst, hi)
	return true, nil
}

// plainCheck validates a decrypted page by what encryption covered, so that a wrong
// key is caught: in full_crc32 the low LSN half before the CRC; in the legacy format
// the checksum the server computed before encrypting (bytes 0..3 and the trailer,
// both stored in the clear). page_compressed pages are checked by their stream when
// decompressed.
func (c *PageCrypt) plainCheck(page []byte) string {
	switch {
	case PageCompressed(page, c.flags):
		return ""
	case c.flags.FullCRC32():
		if be32(page, len(page)-8) != be32(page, offLSN+4) {
			return "LSN in header and trailer differ after decryption"
		}
		return ""
	case c.flags.ZipSize() != 0:
		if s := be32(page, offChecksum); s != zipCRC32(page) && s != noChecksum && s != zipAdler32(page) {
			return "compressed page checksum mismatch after decryption"
		}
		return ""
	}
	if be32(page, offLSN+4) != be32(page, len(page)-4) {
		return "LSN in header and trailer differ after decryption"
	}
	if r := legacyChecksum(page); r != "" {
		return r + " after decryption"
	}
	return ""
}

// EncryptPage encrypts plain, page pageNo as DecryptPage returns it or as the apply
// wrote it (page_compressed pages compressed first), into dst (len(dst) == len(plain);
// dst may be plain) as the server writes it: the key version (the plugin's latest at
// flush time: the caller gives it) in bytes 0..3 (full_crc32) or 26..29 (legacy), the
// IV from the space id, pageNo and FIL_PAGE_LSN, then the checksum of the encrypted
// image (full_crc32: CRC-32C at the end of the payload, the rest of the page zeroed;
// legacy: bytes 30..33). It copies plain unchanged when Encrypts is false.
func (c *PageCrypt) EncryptPage(dst, plain []byte, pageNo, keyVersion uint32) error {
	if len(dst) != len(plain) || len(plain) != c.flags.PhysicalSize() {
		return fmt.Errorf("innodb: encrypt page %d: got %d and %d bytes, page size is %d",
			pageNo, len(dst), len(plain), c.flags.PhysicalSize())
	}
	if !c.Encrypts(plain, pageNo) {
		copy(dst, plain)
		return nil
	}
	if keyVersion == 0 {
		return fmt.Errorf("innodb: encrypt page %d: key version 0 means not encrypted", pageNo)
	}
	block, err := c.pageKey(keyVersion)
	if err != nil {
		return fmt.Errorf("innodb: encrypt page %d: %w", pageNo, err)
	}
	lo, hi, err := c.span(plain)
	if err != nil {
		return fmt.Errorf("innodb: encrypt page %d: %w", pageNo, err)
	}
	if &dst[0] != &plain[0] {
		copy(dst, plain)
	}
	if c.flags.FullCRC32() && PageType(dst)&fcrc32CompressedBit == 0 {
		setFullCRC32Trailer(dst) // buf_page_encrypt does it before encrypting
	}
	c.transform(block, dst[lo:hi], pageIV(c.spaceID, pageNo, PageLSN(plain)), true)
	if c.flags.FullCRC32() {
		binary.BigEndian.PutUint32(dst[offChecksum:], keyVersion)
		clear(dst[hi+4:])
		binary.BigEndian.PutUint32(dst[hi:], crc32c(dst[:hi]))
		return nil
	}
	binary.BigEndian.PutUint32(dst[offKeyVersion:], keyVersion)
	if PageType(dst) == typePageCompressedEncrypted {
		clear(dst[hi:])
	}
	binary.BigEndian.PutUint32(dst[offCryptSum:], c.legacyCryptSum(dst))
	return nil
}

// Byte ranges of the legacy page_compressed header (fil0fil.h): the payload length
// at FIL_PAGE_DATA, then for an encrypted page the algorithm, then the payload.
const (
	offCompLen       = offData // FIL_PAGE_DATA + FIL_PAGE_COMP_SIZE
	offCompAlgoEnc   = offData + 2
	compHeader       = offData + 2 // FIL_PAGE_COMP_METADATA_LEN
	compHeaderEnc    = offData + 4 // FIL_PAGE_ENCRYPT_COMP_METADATA_LEN
	fcrc32ChecksumSz = 4
)

// span returns the encrypted byte range [lo, hi) of a page; in full_crc32, hi is also
// where the checksum of the stored image sits.
func (c *PageCrypt) span(page []byte) (lo, hi int, err error) {
	if c.flags.FullCRC32() {
		size := len(page)
		if t := PageType(page); t&fcrc32CompressedBit != 0 {
			size = int(t&^fcrc32CompressedBit) << 8
			if !c.flags.PageCompressed() || size >= len(page) || size < offData+fcrc32ChecksumSz {
				return 0, 0, errors.New("page_compressed size out of range")
			}
		}
		return offKeyVersion, size - fcrc32ChecksumSz, nil
	}
	if PageType(page) == typePageCompressedEncrypted {
		n := int(binary.BigEndian.Uint16(page[offCompLen:]))
		if n == 0 || n > len(page)-compHeaderEnc {
			return 0, 0, errors.New("page_compressed payload size out of range")
		}
		return compHeaderEnc, compHeaderEnc + n, nil
	}
	return offData, len(page) - trailerLen, nil
}

// cryptSumOK checks the checksum the server stores after encrypting
// (buf_page_verify_crypt_checksum): full_crc32, CRC-32C of [0, hi) at hi; legacy,
// bytes 30..33 hold the crc32 checksum of the image (page_zip_calc_checksum for a
// ROW_FORMAT=COMPRESSED page), or in non-strict mode "none" or the "innodb" one.
func (c *PageCrypt) cryptSumOK(page []byte, hi int) bool {
	if c.flags.FullCRC32() {
		return crc32c(page[:hi]) == be32(page, hi)
	}
	sum := be32(page, offCryptSum)
	if sum == noChecksum || sum == c.legacyCryptSum(page) {
		return true
	}
	if c.flags.ZipSize() != 0 {
		return sum == zipAdler32(page)
	}
	return sum == foldNewChecksum(page)
}

// legacyCryptSum is fil_crypt_calculate_checksum: crc32 of the (encrypted) page.
func (c *PageCrypt) legacyCryptSum(page []byte) uint32 {
	if c.flags.ZipSize() != 0 {
		return zipCRC32(page)
	}
	return legacyCRC32(page)
}

// clearCryptFields turns a decrypted page into the page as it would be stored
// unencrypted: the key version zeroed and in full_crc32 the plaintext's CRC-32C.
func (c *PageCrypt) clearCryptFields(page []byte, hi int) {
	if c.flags.FullCRC32() {
		clear(page[offChecksum : offChecksum+4])
		binary.BigEndian.PutUint32(page[hi:], crc32c(page[:hi]))
		return
	}
	clear(page[offKeyVersion:offSpaceID])
}

// ivSpaceID is the space id that entered the IV of a stored page: the tablespace's
// in full_crc32, FIL_PAGE_SPACE_ID (in the clear) in the legacy format, as the server
// reads them.
func (c *PageCrypt) ivSpaceID(page []byte) uint32 {
	if c.flags.FullCRC32() {
		return c.spaceID
	}
	return be32(page, offSpaceID)
}

// pageIV is the 16-byte IV of a page: space id, page number and LSN, little-endian.
func pageIV(spaceID, pageNo uint32, lsn uint64) []byte {
	iv := make([]byte, aes.BlockSize)
	binary.LittleEndian.PutUint32(iv, spaceID)
	binary.LittleEndian.PutUint32(iv[4:], pageNo)
	binary.LittleEndian.PutUint64(iv[8:], lsn)
	return iv
}

// pageKey returns the page key of a key version, deriving it once.
func (c *PageCrypt) pageKey(version uint32) (cipher.Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.blocks[version]; ok {
		return b, nil
	}
	key, err := c.keys(c.data.KeyID, version)
	if err != nil {
		return nil, fmt.Errorf("space %d key (id %d, version %d): %w", c.spaceID, c.data.KeyID, version, err)
	}
	kb, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("space %d key (id %d, version %d): %w", c.spaceID, c.data.KeyID, version, err)
	}
	local := make([]byte, aes.BlockSize)
	kb.Encrypt(local, c.data.IV[:])
	b, err := aes.NewCipher(local)
	if err != nil {
		return nil, err
	}
	c.blocks[version] = b
	return b, nil
}

// transform encrypts or decrypts b in place under block and iv, in the plugin's mode.
func (c *PageCrypt) transform(block cipher.Block, b, iv []byte, encrypt bool) {
	aesnopad.Transform(block, c.ctr, b, iv, encrypt)
}
