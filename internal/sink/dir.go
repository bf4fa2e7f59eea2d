package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Dir writes a backup directory in mariabackup's layout. It is marked incomplete
// until the manifest is written.
type Dir struct{ dir string }

var _ Sink = (*Dir)(nil)

// NewDir returns the end for a backup into dir, which must be new or empty; it
// creates nothing before Open.
func NewDir(dir string) (*Dir, error) {
	if err := checkTarget(dir); err != nil {
		return nil, err
	}
	return &Dir{dir: dir}, nil
}

// Name is the directory.
func (d *Dir) Name() string { return d.dir }

// Caps: a directory can be rewritten, in place too, until the manifest is written;
// it is written straight to local disk.
func (d *Dir) Caps() Caps {
	return Caps{Rewrite: true, Patch: true, Direct: true, Storage: manifest.Storage{Format: manifest.StorageDir}}
}

// Open creates the directory and marks it incomplete until Commit.
func (d *Dir) Open(context.Context, string) error {
	if err := checkTarget(d.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(d.dir, 0o750); err != nil {
		return fmt.Errorf("create target directory %s: %w", d.dir, filecopy.WrapWriteErr(err))
	}
	msg := "ferry backup in progress or interrupted: this directory is not a usable backup.\n"
	return os.WriteFile(filepath.Join(d.dir, manifest.IncompleteMarker), []byte(msg), 0o640)
}

// checkTarget refuses a target directory that exists and is not empty.
func checkTarget(dir string) error {
	if dir == "" {
		return setting.Errorf("%s is required", setting.TargetDir)
	}
	ents, err := os.ReadDir(dir)
	if err == nil && len(ents) > 0 {
		return setting.Errorf("target directory %s is not empty: choose a new %s (ferry never overwrites a backup)", dir, setting.TargetDir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("target directory %s: %w", dir, err)
	}
	return nil
}

// Create starts a file in the directory.
func (d *Dir) Create(rel string, o FileOptions) (File, error) {
	path := filepath.Join(d.dir, rel)
	t, err := filecopy.Create(path, o.Sparse)
	if err != nil {
		return nil, err
	}
	t.Close()
	t, err = filecopy.Open(path, o.Sparse, true)
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

// Patch rewrites bytes of a closed copy in place and returns the CRC-32C of what they
// replaced. The directory is synced at Commit.
func (d *Dir) Patch(_ int, rel string, off int64, p []byte) (uint32, error) {
	f, err := os.OpenFile(filepath.Join(d.dir, rel), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, fmt.Errorf("open copy %s to patch it: %w", rel, err)
	}
	defer f.Close()
	old := make([]byte, len(p))
	if _, err := f.ReadAt(old, off); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read copy %s at %d: %w", rel, off, err)
	}
	if _, err := f.WriteAt(p, off); err != nil {
		return 0, fmt.Errorf("patch copy %s at %d: %w", rel, off, filecopy.WrapWriteErr(err))
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("patch copy %s: %w", rel, filecopy.WrapWriteErr(err))
	}
	return checksum.Sum(old), nil
}

// Drain implements Sink: a directory stores what is written at once.
func (d *Dir) Drain(context.Context) error { return nil }

// Remove deletes a stale copy.
func (d *Dir) Remove(rel string) error {
	if err := os.Remove(filepath.Join(d.dir, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale copy %s: %w", rel, err)
	}
	return nil
}

// Rename moves a copy.
func (d *Dir) Rename(from, to string) error {
	dst := filepath.Join(d.dir, to)
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(d.dir, from), dst); err != nil {
		return fmt.Errorf("rename copy %s to %s: %w", from, to, err)
	}
	return nil
}

// Commit syncs the files, writes the manifest and removes the incomplete marker.
func (d *Dir) Commit(_ context.Context, m *manifest.Manifest) error {
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

// Abort leaves the partial directory with its incomplete marker.
func (d *Dir) Abort(error) string {
	return fmt.Sprintf("the partial backup in %s is marked incomplete", d.dir)
}
