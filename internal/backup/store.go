package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// store is where a backup's files go: a directory, or a stream.
type store interface {
	// create starts a new file of the backup.
	create(rel string, sparse bool) (storeFile, error)
	// createSmall starts a small metadata file (never compressed).
	createSmall(rel string) (storeFile, error)
	// rewritable: copies can be written at any offset (by parallel segments), removed
	// and renamed. A stream is written once, in order.
	rewritable() bool
	remove(rel string) error
	rename(from, to string) error
	// commit writes the manifest last and makes the backup complete.
	commit(m *manifest.Manifest) error
}

// storeFile is one file being written. A stream's files take writes in order only.
type storeFile interface {
	WriteAt(p []byte, off int64) error
	// Close ends the file at size.
	Close(size int64) error
}

// writeWhole stores a small file in one piece and returns its manifest entry.
func writeWhole(s store, rel string, data []byte, kind string) (manifest.File, error) {
	f, err := s.createSmall(rel)
	if err != nil {
		return manifest.File{}, err
	}
	if err := f.WriteAt(data, 0); err != nil {
		f.Close(0)
		return manifest.File{}, err
	}
	if err := f.Close(int64(len(data))); err != nil {
		return manifest.File{}, err
	}
	return manifest.File{Path: rel, Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data)), Kind: kind}, nil
}

// dirStore writes a backup directory in mariabackup's layout.
type dirStore struct{ dir string }

func (d dirStore) rewritable() bool { return true }

func (d dirStore) createSmall(rel string) (storeFile, error) { return d.create(rel, false) }

func (d dirStore) create(rel string, sparse bool) (storeFile, error) {
	path := filepath.Join(d.dir, rel)
	t, err := filecopy.Create(path, sparse)
	if err != nil {
		return nil, err
	}
	t.Close()
	t, err = filecopy.Open(path, sparse, true)
	if err != nil {
		return nil, err
	}
	return dirFile{t}, nil
}

type dirFile struct{ t *filecopy.Target }

func (f dirFile) WriteAt(p []byte, off int64) error { return f.t.WriteAt(p, off) }

func (f dirFile) Close(size int64) error {
	err := f.t.Truncate(size)
	if cerr := f.t.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", filecopy.WrapWriteErr(cerr))
	}
	return err
}

func (d dirStore) remove(rel string) error {
	if err := os.Remove(filepath.Join(d.dir, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale copy %s: %w", rel, err)
	}
	return nil
}

func (d dirStore) rename(from, to string) error {
	dst := filepath.Join(d.dir, to)
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(d.dir, from), dst); err != nil {
		return fmt.Errorf("rename copy %s to %s: %w", from, to, err)
	}
	return nil
}

// commit syncs the files, writes the manifest and removes the incomplete marker.
func (d dirStore) commit(m *manifest.Manifest) error {
	if err := filecopy.SyncFS(d.dir); err != nil {
		return err
	}
	if err := manifest.Write(d.dir, m); err != nil {
		return filecopy.WrapWriteErr(err)
	}
	if err := os.Remove(filepath.Join(d.dir, manifest.IncompleteMarker)); err != nil {
		return fmt.Errorf("remove incomplete marker: %w", err)
	}
	return manifest.SyncDir(d.dir)
}
