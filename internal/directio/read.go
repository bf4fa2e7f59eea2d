package directio

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// ReadAt reads len(buf) bytes at off, like os.File.ReadAt: it returns n < len(buf)
// only with an error, io.EOF when the file ends first (the final block of a file whose
// size is not a multiple of Align comes back short, with its real bytes). For direct
// reads buf must come from AlignedBuffer (aligned address and length) and off must be
// a multiple of Align.
func (f *File) ReadAt(buf []byte, off int64) (int, error) {
	if f.direct && (!aligned(buf) || off%Align != 0) {
		return 0, fmt.Errorf("directio: read %s: %d bytes at %d: buffer, length and offset must be %d-aligned", f.path, len(buf), off, Align)
	}
	n := 0
	for n < len(buf) {
		m, err := pread(f.fd, buf[n:], off+int64(n))
		if err != nil {
			return n, fmt.Errorf("directio: read %s at %d: %w", f.path, off+int64(n), err)
		}
		n += m
		// A short direct read that ends off-alignment can only be the end of file;
		// another pread from there would fail with EINVAL.
		if m == 0 || (f.direct && n%Align != 0 && n < len(buf)) {
			return n, io.EOF
		}
	}
	return n, nil
}

// pread is unix.Pread retried on EINTR.
func pread(fd int, b []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, b, off)
		if err != unix.EINTR {
			return n, err
		}
	}
}
