package sinktest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// ReadTree returns every regular file under dir by its slash-separated path relative to
// dir, the manifest and the incomplete marker left out: what a restore of a directory
// backup (or a clone's staging) would take.
func ReadTree(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == manifest.FileName || rel == manifest.IncompleteMarker {
			return nil
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	return files, err
}

// CheckSums returns an error naming the first file of m whose size or CRC-32C differs
// from what the end's reader computed as it wrote the file out (sum; ok false: not
// written), as restore refuses such a backup.
func CheckSums(m *manifest.Manifest, sum func(path string) (size int64, crc uint32, ok bool)) error {
	for _, f := range m.Files {
		size, crc, ok := sum(f.Path)
		if !ok {
			return fmt.Errorf("%s, which the manifest lists, was not received", f.Path)
		}
		if size != f.Size || checksum.Hex(crc) != f.CRC32C {
			return fmt.Errorf("%s received as %d bytes with CRC-32C %s, the manifest says %d bytes with %s", f.Path, size, checksum.Hex(crc), f.Size, f.CRC32C)
		}
	}
	return nil
}
