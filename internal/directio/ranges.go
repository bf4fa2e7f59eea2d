package directio

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Range is a byte range [Off, Off+Len) of a file.
type Range struct{ Off, Len int64 }

// Fder is an open file: *File or *os.File.
type Fder interface{ Fd() uintptr }

// DataRanges returns the allocated (non-hole) ranges of the first size bytes of f,
// found with SEEK_DATA/SEEK_HOLE, so a copy can keep page_compressed files sparse.
// Where the file system cannot tell, the answer is one range covering [0, size). The
// file offset of f is restored; do not call it concurrently with Read/Seek on f.
func DataRanges(f Fder, size int64) ([]Range, error) {
	if size <= 0 {
		return nil, nil
	}
	fd := int(f.Fd())
	cur, err := unix.Seek(fd, 0, unix.SEEK_CUR)
	if err != nil {
		return nil, fmt.Errorf("directio: data ranges: %w", err)
	}
	defer unix.Seek(fd, cur, unix.SEEK_SET)
	out, err := scanData(fd, size)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return []Range{{0, size}}, nil
	}
	return out, err
}

// scanData alternates SEEK_DATA and SEEK_HOLE from offset 0 up to size.
func scanData(fd int, size int64) ([]Range, error) {
	var out []Range
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) || (err == nil && data >= size) {
			break // only a hole is left
		}
		if err != nil {
			return nil, fmt.Errorf("directio: seek data at %d: %w", off, err)
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("directio: seek hole at %d: %w", data, err)
		}
		hole = min(hole, size)
		out = append(out, Range{Off: data, Len: hole - data})
		off = hole
	}
	return out, nil
}
