// Package diskspace answers how much room a filesystem has, and refuses a job before
// it writes its first byte when the room it needs is not there. Every verb that knows
// (or can bound) what it will write asks here, so the refusal reads the same
// everywhere: what was needed, what is free, and where.
package diskspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNoRoom is wrapped by the error Check returns when the room is not there.
var ErrNoRoom = errors.New("not enough free disk space")

// Free returns the bytes an unprivileged writer may still use on the filesystem
// that holds path. A path that does not exist yet is answered for its nearest
// existing parent (where it would be created).
func Free(path string) (int64, error) {
	dir, err := existing(path)
	if err != nil {
		return 0, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Check refuses, in one line, a job that needs need bytes on the filesystem of path
// for what (for example "the restored datadir and its recovery"), when less is free
// there. A need of zero or less always passes.
func Check(path string, need int64, what string) error {
	if need <= 0 {
		return nil
	}
	free, err := Free(path)
	if err != nil {
		return err
	}
	if free < need {
		dir, _ := existing(path)
		return fmt.Errorf("%w for %s in %s: %s needed, %s free: free space there or choose a directory on another filesystem", ErrNoRoom, what, dir, Human(need), Human(free))
	}
	return nil
}

// existing returns path, or its nearest parent that exists.
func existing(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("free space of %s: %w", path, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p, nil
		}
		p = parent
	}
}

// Human formats a byte count for a message: 1.5 GiB, 300 MiB, 12 KiB, 10 B.
func Human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	if v >= 100 {
		return fmt.Sprintf("%.0f %ciB", v, "KMGTP"[exp])
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[exp])
}

// Allocated is the room the file at path takes on its filesystem: its allocated blocks
// (less than its size when it is sparse), or size where the filesystem reports none or
// the file cannot be read.
func Allocated(path string, size int64) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return size
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks > 0 {
		return st.Blocks * 512
	}
	return size
}
