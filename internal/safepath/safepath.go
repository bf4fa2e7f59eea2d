// Package safepath confines the file names ferry reads from input (manifests,
// streams, repositories, clone peers, DDL markers) to the directory they belong in.
// Every such name goes through Join before a file is opened or created with it: it
// must be relative and clean, and no directory on its way may be a symbolic link, so
// a crafted backup can neither read nor write outside its target.
package safepath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Bounds on a name read from input: Linux's PATH_MAX and NAME_MAX.
const (
	MaxLen       = 4096
	MaxComponent = 255
)

// ErrUnsafe marks a name that would leave its directory or that is malformed.
var ErrUnsafe = errors.New("unsafe path")

// Check says whether rel is a name ferry accepts from input: relative, '/'-separated,
// at most MaxLen bytes, no empty, "." or ".." component, no NUL byte. A leading "./"
// (as mariadb-backup writes some names) is accepted.
func Check(rel string) error {
	name := strings.TrimPrefix(rel, "./")
	switch {
	case name == "":
		return fmt.Errorf("%w: empty file name", ErrUnsafe)
	case len(name) > MaxLen:
		return fmt.Errorf("%w: file name of %d bytes (at most %d)", ErrUnsafe, len(name), MaxLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: file name %q holds a NUL byte", ErrUnsafe, name)
	case name[0] == '/':
		return fmt.Errorf("%w: path %q is absolute: it leaves the target directory", ErrUnsafe, rel)
	}
	for _, c := range strings.Split(name, "/") {
		switch {
		case c == "..":
			return fmt.Errorf("%w: path %q leaves the target directory", ErrUnsafe, rel)
		case c == "" || c == ".":
			return fmt.Errorf("%w: path %q is not clean", ErrUnsafe, rel)
		case len(c) > MaxComponent:
			return fmt.Errorf("%w: path %q has a component longer than %d bytes", ErrUnsafe, rel, MaxComponent)
		}
	}
	return nil
}

// Join checks rel and returns it joined to root, after making sure that nothing on
// its way below root that already exists is a symbolic link or, for the directories
// on the way, anything but a directory. The last component may not exist yet; if it
// exists it must not be a symbolic link either. Open the result with O_NOFOLLOW
// (filecopy does) so that a link created after the check is refused too.
func Join(root, rel string) (string, error) {
	if err := Check(rel); err != nil {
		return "", err
	}
	parts := strings.Split(strings.TrimPrefix(rel, "./"), "/")
	p := root
	for i, c := range parts {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(root, filepath.Join(parts...)), nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%w: %s is a symbolic link: ferry never follows one inside a backup or a staging directory; remove it", ErrUnsafe, p)
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return "", fmt.Errorf("%w: %s is not a directory", ErrUnsafe, p)
		}
	}
	return p, nil
}

// MkdirParents creates the parent directories of the file rel below root and returns
// the file's path, refusing a symbolic link on the way (checked again once they
// exist, so a link raced in meanwhile is refused too).
func MkdirParents(root, rel string, perm fs.FileMode) (string, error) {
	p, err := Join(root, rel)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), perm); err != nil {
		return "", err
	}
	return Join(root, rel)
}

// CheckTree walks root and refuses any symbolic link in it: a backup directory or a
// staging directory never holds one.
func CheckTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is a symbolic link: a backup never holds one; remove it", ErrUnsafe, p)
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, p)
		}
		return nil
	})
}
