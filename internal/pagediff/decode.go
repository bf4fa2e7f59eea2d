package pagediff

import (
	"fmt"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/innodb"
)

// CodecDecoder returns a DecodeFunc that turns pages of the tablespaces in dir into
// their plain form (decrypted, decompressed) with the InnoDB page codec
// (innodb.SpaceCodec), set up from each tablespace's page 0 in dir. keys and algorithm
// ("aes_cbc", "aes_ctr") are the key management plugin's; keys may be nil when no
// tablespace is encrypted, and an encrypted page then fails to decode.
func CodecDecoder(dir string, keys innodb.KeyFunc, algorithm string) (DecodeFunc, error) {
	l, err := readLayout(dir)
	if err != nil {
		return nil, err
	}
	files, err := tablespaceFiles(dir, l)
	if err != nil {
		return nil, err
	}
	codecs := map[uint32]*innodb.SpaceCodec{}
	for _, name := range sortedKeys(files) {
		if l.isSystem(name) && name != l.systemFiles[0] {
			continue // page 0 of the system tablespace is in its first file
		}
		c, err := spaceCodec(filepath.Join(dir, name), keys, algorithm)
		if err != nil {
			return nil, err
		}
		if c != nil {
			codecs[c.SpaceID] = c
		}
	}
	return func(space, pageNo uint32, _ innodb.SpaceFlags, raw []byte) ([]byte, error) {
		c := codecs[space]
		if c == nil {
			return nil, fmt.Errorf("tablespace %d: no page 0 to decode its pages with", space)
		}
		dst := make([]byte, len(raw))
		if _, err := c.Decode(dst, raw, pageNo); err != nil {
			return nil, err
		}
		return dst, nil
	}, nil
}

// spaceCodec sets up the codec of the tablespace whose page 0 starts the file at
// path; nil if page 0 is not valid (a tablespace never written).
func spaceCodec(path string, keys innodb.KeyFunc, algorithm string) (*innodb.SpaceCodec, error) {
	b, err := readHead(path, maxPageSize)
	if err != nil {
		return nil, err
	}
	h, err := innodb.ParseSpaceHeader(b)
	if err != nil || innodb.IsZero(b) || len(b) < h.Flags.PhysicalSize() {
		return nil, nil
	}
	c := &innodb.SpaceCodec{SpaceID: h.SpaceID, Flags: h.Flags}
	cd, err := innodb.ParseCryptData(b[:h.Flags.PhysicalSize()])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cd != nil && keys != nil {
		if c.Crypt, err = innodb.NewPageCrypt(h.SpaceID, h.Flags, cd, keys, algorithm); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return c, nil
}
