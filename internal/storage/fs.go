package storage

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
)

// tmpPrefix starts the names of objects being written; they are not listed.
const tmpPrefix = ".ferry-tmp-"

// FS stores objects as files under a root directory (local disk or NFS). A Put writes
// a temporary file, syncs it and renames it into place, so an object is there whole
// or not at all.
type FS struct{ root string }

// NewFS returns the storage rooted at dir, which must exist.
func NewFS(dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		// ferry never makes the directory itself: a mistyped path or a missing mount
		// must not become a repository on the local disk.
		return nil, fmt.Errorf("repository directory %s does not exist: check the path, or create the directory (mkdir -p %s) and ferry backup (or copy) starts a repository in it", abs, abs)
	}
	if err != nil {
		return nil, fmt.Errorf("repository directory %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("repository %s is not a directory", abs)
	}
	return &FS{root: abs}, nil
}

// Location implements Storage.
func (s *FS) Location() string { return s.root }

func (s *FS) path(key string) (string, error) {
	clean := filepath.ToSlash(filepath.Clean(key))
	if key == "" || clean != key || strings.HasPrefix(clean, "../") || filepath.IsAbs(key) || strings.HasPrefix(filepath.Base(key), tmpPrefix) {
		return "", fmt.Errorf("invalid object key %q", key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put implements Storage.
func (s *FS) Put(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32) error {
	dst, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return fmt.Errorf("put %s: %w", key, filecopy.WrapWriteErr(err))
	}
	f, err := os.CreateTemp(filepath.Dir(dst), tmpPrefix+filepath.Base(dst)+"-")
	if err != nil {
		return fmt.Errorf("put %s: %w", key, filecopy.WrapWriteErr(err))
	}
	tmp := f.Name()
	err = s.write(ctx, f, data, size, crc)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = filecopy.WrapWriteErr(cerr)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put %s: %w", key, err)
	}
	return syncDir(filepath.Dir(dst))
}

// write copies the object into f, checks its CRC-32C and syncs it.
func (s *FS) write(ctx context.Context, f *os.File, data io.ReaderAt, size int64, crc uint32) error {
	h := crc32.New(checksum.Table)
	w := io.MultiWriter(f, h)
	if _, err := io.Copy(w, io.NewSectionReader(data, 0, size)); err != nil {
		return filecopy.WrapWriteErr(err)
	}
	if got := h.Sum32(); got != crc {
		return fmt.Errorf("the data's CRC-32C is %s, the caller said %s (refused)", checksum.Hex(got), checksum.Hex(crc))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return filecopy.WrapWriteErr(f.Sync())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Get implements Storage.
func (s *FS) Get(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	defer f.Close()
	var r io.Reader = io.NewSectionReader(f, off, 1<<62)
	if n >= 0 {
		r = io.LimitReader(r, n)
	}
	return fn(r)
}

// Stat implements Storage.
func (s *FS) Stat(_ context.Context, key string) (ObjectInfo, error) {
	p, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, err)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// List implements Storage.
func (s *FS) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	var out []ObjectInfo
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(s.root, p)
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p != s.root && !strings.HasPrefix(prefix, key+"/") && !strings.HasPrefix(key+"/", prefix) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) || strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("list %s: %w", s.root, err)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	for _, o := range out {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Prefixes implements Storage.
func (s *FS) Prefixes(_ context.Context, prefix string) ([]string, error) {
	dir, err := s.path(strings.TrimSuffix(prefix, "/"))
	if prefix == "" {
		dir, err = s.root, nil
	}
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Delete implements Storage; directories left empty are removed up to the root, and
// so are the stale temporary files of uploads a killed process left in them (never
// listed, they would otherwise keep a deleted backup's directory, and the backup
// listed, for ever).
func (s *FS) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		removeStaleTemps(dir, time.Now().Add(-StaleUpload))
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// StaleUpload is how long a temporary file of an upload must have been left untouched
// before a delete in its directory removes it: an upload under way writes to it.
const StaleUpload = time.Hour

// removeStaleTemps removes the temporary upload files in dir last written before
// cutoff.
func removeStaleTemps(dir string, cutoff time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
