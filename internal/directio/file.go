package directio

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// File is a read-only file opened for direct I/O (or buffered I/O where the file
// system does not support O_DIRECT). Its methods are safe for concurrent use, except
// Close.
type File struct {
	fd     int
	path   string
	direct bool
}

// openFile is unix.Open; tests replace it to simulate file systems without O_DIRECT.
var openFile = unix.Open

// Open opens path with O_RDONLY|O_DIRECT|O_CLOEXEC. If the file system rejects
// O_DIRECT with EINVAL, the file is opened for buffered reads and Direct reports false.
func Open(path string) (*File, error) {
	const flags = unix.O_RDONLY | unix.O_CLOEXEC
	fd, err := openRetry(path, flags|unix.O_DIRECT)
	if err == nil {
		return &File{fd: fd, path: path, direct: true}, nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("directio: open %s: %w", path, err)
	}
	if fd, err = openRetry(path, flags); err != nil {
		return nil, fmt.Errorf("directio: open %s: %w", path, err)
	}
	return &File{fd: fd, path: path}, nil
}

func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := openFile(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Direct reports whether reads bypass the page cache (false after the buffered
// fallback).
func (f *File) Direct() bool { return f.direct }

// Name returns the path the file was opened with.
func (f *File) Name() string { return f.path }

// Fd returns the file descriptor, valid until Close.
func (f *File) Fd() uintptr { return uintptr(f.fd) }

// Size returns the current size of the file in bytes.
func (f *File) Size() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, fmt.Errorf("directio: stat %s: %w", f.path, err)
	}
	return st.Size, nil
}

// Close closes the file.
func (f *File) Close() error {
	if f.fd < 0 {
		return fmt.Errorf("directio: close %s: already closed", f.path)
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return fmt.Errorf("directio: close %s: %w", f.path, err)
	}
	return nil
}
