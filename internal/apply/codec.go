package apply

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ferry-backup/ferry/internal/innodb"
)

// setCodec sets up how the tablespace's pages are read and written when they are
// encrypted or page_compressed, from its page 0 as it is in the file.
func (a *applier) setCodec(sp *space) error {
	if !sp.flags.PageCompressed() && !sp.crypt && !sp.deferred {
		return nil
	}
	page0 := make([]byte, sp.physSize())
	if err := sp.readPage(page0, 0); err != nil {
		return err
	}
	cd, err := innodb.ParseCryptData(page0)
	if err != nil {
		return fmt.Errorf("%s: %w", sp.path(), err)
	}
	sp.crypt = cd != nil
	if cd == nil && !sp.flags.PageCompressed() {
		return nil
	}
	c := &innodb.SpaceCodec{SpaceID: sp.id, Flags: sp.flags, KeyVersion: 1,
		Compress: innodb.CompressOptions{Level: a.cfg.CompressionLevel}}
	if cd != nil {
		if a.cfg.Keys == nil {
			return nil // unsupported() refuses its pages
		}
		if c.Crypt, err = innodb.NewPageCrypt(sp.id, sp.flags, cd, innodb.KeyFunc(a.cfg.Keys), a.cfg.Algorithm); err != nil {
			return fmt.Errorf("%s: %w", sp.path(), err)
		}
		c.Encrypt = cd.EncryptsPages(a.cfg.EncryptTables)
	}
	sp.codec = c
	return nil
}

// ErrKey means the key file does not decrypt a tablespace: it is not the source's.
var ErrKey = errors.New("the key file does not decrypt the tablespace")

// infimum is the name of the record every index page starts its chain with.
var infimum = []byte("infimum\x00")

// keyProbe is how many pages of an encrypted tablespace checkKey looks at for one that
// is encrypted.
const keyProbe = 256

// checkKey decrypts the first encrypted index page of an encrypted tablespace, so that a
// wrong key file is found even when the redo touches none of its pages (the server
// would only find it when a query reads the table).
func (a *applier) checkKey(sp *space) error {
	if sp.codec == nil || sp.codec.Crypt == nil {
		return nil
	}
	buf := make([]byte, sp.physSize())
	if err := sp.open(); err != nil {
		return err
	}
	st, err := sp.segs[0].f.Stat()
	if err != nil {
		return err
	}
	pages := uint32(min(st.Size()/int64(sp.physSize()), keyProbe))
	for no := uint32(1); no < pages; no++ {
		if err := sp.readPage(buf, no); err != nil {
			return err
		}
		// An index page: its decrypted trailer tells a wrong key (an IBUF_BITMAP page
		// decrypted with a wrong key passed the check on 10.11.19).
		if innodb.IsZero(buf) || !sp.codec.Crypt.Encrypted(buf, no) || innodb.PageType(buf) != pageTypeIndex {
			continue
		}
		if _, err := sp.codec.Decode(buf, buf, no); err != nil {
			return fmt.Errorf("%w %s (page %d): %v", ErrKey, sp.path(), no, err)
		}
		// The page's checksums passed; its content must too: every index page holds the
		// infimum record at a fixed place.
		if !bytes.Equal(buf[99:107], infimum) && !bytes.Equal(buf[101:109], infimum) {
			return fmt.Errorf("%w %s (page %d): the decrypted index page has no infimum record", ErrKey, sp.path(), no)
		}
		return nil
	}
	return nil
}
