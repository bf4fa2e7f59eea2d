package sinktest

import (
	"io/fs"
	"os"
	"path/filepath"

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
