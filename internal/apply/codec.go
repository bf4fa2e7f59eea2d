package apply

import (
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
