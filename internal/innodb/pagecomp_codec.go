package innodb

import (
	"fmt"
	"sync"
)

// SpaceCodec reads and writes the pages of one tablespace through its encryption and
// page compression, in the server's order: a read decrypts, then decompresses
// (buf_page_decrypt_after_read); a write compresses, then encrypts
// (buf_page_encrypt). Both sides of it use the same plain form: the page as the server
// would store it with neither, which is what Checker validates and what the apply
// changes. A SpaceCodec is safe for concurrent use once set up; it must not be copied
// after first use.
type SpaceCodec struct {
	SpaceID uint32
	Flags   SpaceFlags
	// Crypt decrypts and encrypts; nil when page 0 has no encryption metadata.
	Crypt *PageCrypt
	// Encrypt is whether written pages are encrypted:
	// CryptData.EncryptsPages(innodb_encrypt_tables).
	Encrypt bool
	// KeyVersion is the key version written pages carry: the key management
	// plugin's latest (1 for file_key_management).
	KeyVersion uint32
	// Compress are the server settings page_compressed pages are written with.
	Compress CompressOptions

	zlib sync.Pool // zlib writers of level Compress.Level
}

// Decode turns src, page pageNo as read from the file, into dst, its plain form: it
// decrypts an encrypted page (PageCrypt.DecryptPage) and decompresses a
// page_compressed one (DecompressPage). dst and src have the physical page size and
// may be the same buffer. It reports whether the page was stored transformed.
func (c *SpaceCodec) Decode(dst, src []byte, pageNo uint32) (bool, error) {
	transformed := false
	if c.Crypt != nil {
		dec, err := c.Crypt.DecryptPage(dst, src, pageNo)
		if err != nil {
			return false, err
		}
		transformed, src = dec, dst
	}
	if c.Flags.ZipSize() != 0 {
		if &dst[0] != &src[0] {
			copy(dst, src)
		}
		return transformed, nil
	}
	comp, err := DecompressPage(dst, src, c.Flags)
	if err != nil {
		return false, fmt.Errorf("space %d: %w", c.SpaceID, err)
	}
	return transformed || comp, nil
}

// Encode turns plain, page pageNo in its plain form (as Decode returns it, or as the
// apply finished it with SealPage), into dst, the bytes the server would write:
// compressed if the tablespace is page_compressed and the page compresses, then
// encrypted if Encrypt and the page is one the server encrypts. It returns how many
// bytes of dst matter (the rest is zero: the server punches it out); the physical page
// size when the page is stored uncompressed. dst must not be plain.
func (c *SpaceCodec) Encode(dst, plain []byte, pageNo uint32) (int, error) {
	size := len(plain)
	if len(dst) != size || size != c.Flags.PhysicalSize() {
		return 0, fmt.Errorf("innodb: encode page %d: got %d and %d bytes, page size is %d", pageNo, len(dst), size, c.Flags.PhysicalSize())
	}
	encrypt := c.Encrypt && c.Crypt != nil && c.Crypt.Encrypts(plain, pageNo)
	n := 0
	if c.Flags.PageCompressed() && c.Flags.ZipSize() == 0 {
		o := c.Compress
		o.Encrypted = encrypt
		var err error
		if n, err = compressPage(dst, plain, c.Flags, c.SpaceID, pageNo, o, &c.zlib); err != nil {
			return 0, err
		}
	} else {
		copy(dst, plain)
	}
	if n == 0 {
		n = size
	}
	if !encrypt {
		return n, nil
	}
	if err := c.Crypt.EncryptPage(dst, dst, pageNo, c.KeyVersion); err != nil {
		return 0, err
	}
	return n, nil
}
