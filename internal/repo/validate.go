package repo

import (
	"fmt"
	"strconv"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// Validate checks that a repository manifest is whole before anything is read: the
// names and sizes every manifest must have right (manifest.Validate), every blob
// within its file and its object, blobs in order without overlap, and their CRC-32Cs
// combining to the file's CRC-32C taken while copying (bytes no blob covers counted as
// zeros), so that checking every blob checks every byte of the file.
func Validate(m *manifest.Manifest) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: backup %s: %w", ErrDamaged, m.ID, err)
	}
	sizes := map[string]int64{}
	for _, o := range m.Objects {
		sizes[o.Key] = o.Size
	}
	for _, f := range m.Files {
		if err := validateFile(f, sizes); err != nil {
			return fmt.Errorf("%w: the manifest of %s: %s: %v", ErrDamaged, m.ID, f.Path, err)
		}
	}
	return nil
}

func validateFile(f manifest.File, objects map[string]int64) error {
	var at int64
	var crc uint32
	for _, b := range f.Blobs {
		osize, ok := objects[b.Object]
		switch {
		case !ok:
			return fmt.Errorf("object %s is not listed", b.Object)
		case b.Offset < 0 || b.StoredSize <= 0 || b.Offset+b.StoredSize > osize:
			return fmt.Errorf("blob at %d+%d lies outside object %s (%d bytes)", b.Offset, b.StoredSize, b.Object, osize)
		case b.RawOffset < at || b.RawSize <= 0:
			return fmt.Errorf("blobs overlap or are out of order at byte %d", b.RawOffset)
		}
		bc, err := parseCRC(b.CRC32C)
		if err != nil {
			return err
		}
		crc = checksum.Combine(crc, checksum.Zeros(b.RawOffset-at), b.RawOffset-at)
		crc = checksum.Combine(crc, bc, b.RawSize)
		at = b.RawOffset + b.RawSize
	}
	if at > f.Size {
		return fmt.Errorf("blobs end at byte %d, past the file's size %d", at, f.Size)
	}
	// Bytes no blob covers are zeros: they count in the file's CRC-32C as such, so a
	// size that lies (a file padded with zeros) fails here.
	crc = checksum.Combine(crc, checksum.Zeros(f.Size-at), f.Size-at)
	if f.CRC32C != "" && checksum.Hex(crc) != f.CRC32C {
		return fmt.Errorf("its blobs' CRC-32Cs combine to %s, the file's is %s", checksum.Hex(crc), f.CRC32C)
	}
	return nil
}

func parseCRC(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil || len(s) != 8 {
		return 0, fmt.Errorf("CRC-32C %q is not 8 hex digits", s)
	}
	return uint32(v), nil
}
