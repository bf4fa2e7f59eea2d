package repo

import (
	"fmt"
	"sort"
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
		bc, err := storedIn(b, objects)
		if err != nil {
			return err
		}
		if b.RawOffset < at || b.RawSize <= 0 {
			return fmt.Errorf("blobs overlap or are out of order at byte %d", b.RawOffset)
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
	return validatePatches(f, objects)
}

// validatePatches checks a file's patches: each within the file and its object, with a
// CRC-32C, in increasing rounds, and the patches of one round apart from each other,
// so that the order a restore applies them in is the one the backup wrote them in.
func validatePatches(f manifest.File, objects map[string]int64) error {
	byRound := map[int][]manifest.Blob{}
	last := 1
	for _, b := range f.Patches {
		if _, err := storedIn(b, objects); err != nil {
			return err
		}
		switch {
		case b.RawOffset < 0 || b.RawSize <= 0 || b.RawOffset+b.RawSize > f.Size:
			return fmt.Errorf("patch %d+%d lies outside the file's %d bytes", b.RawOffset, b.RawSize, f.Size)
		case b.Round < last:
			return fmt.Errorf("patch %d+%d of round %d follows round %d", b.RawOffset, b.RawSize, b.Round, last)
		}
		last = b.Round
		byRound[b.Round] = append(byRound[b.Round], b)
	}
	for round, ps := range byRound {
		sort.Slice(ps, func(a, b int) bool { return ps[a].RawOffset < ps[b].RawOffset })
		for i := 1; i < len(ps); i++ {
			if ps[i].RawOffset < ps[i-1].RawOffset+ps[i-1].RawSize {
				return fmt.Errorf("patches of round %d overlap at byte %d", round, ps[i].RawOffset)
			}
		}
	}
	return nil
}

// storedIn checks that blob b lies within a listed object and returns its CRC-32C.
func storedIn(b manifest.Blob, objects map[string]int64) (uint32, error) {
	osize, ok := objects[b.Object]
	switch {
	case !ok:
		return 0, fmt.Errorf("object %s is not listed", b.Object)
	case b.Offset < 0 || b.StoredSize <= 0 || b.Offset+b.StoredSize > osize:
		return 0, fmt.Errorf("blob at %d+%d lies outside object %s (%d bytes)", b.Offset, b.StoredSize, b.Object, osize)
	}
	return parseCRC(b.CRC32C)
}

func parseCRC(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil || len(s) != 8 {
		return 0, fmt.Errorf("CRC-32C %q is not 8 hex digits", s)
	}
	return uint32(v), nil
}
