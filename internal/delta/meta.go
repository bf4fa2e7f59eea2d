// Package delta reads and writes mariabackup's incremental-backup files (<file>.delta
// and <file>.meta) and applies an incremental backup directory onto a full one, as
// `mariadb-backup --prepare --incremental-dir` does before crash recovery.
//
// A .delta file is a sequence of clusters of pageSize/4 pages each: one header page
// ("xtra" for a full cluster that is not the last, "XTRA" for the last one, then the
// big-endian page numbers of the data pages that follow, ended by 0xFFFFFFFF when the
// cluster is not full), then the page images in that order. Only the last cluster may
// be short; an unchanged tablespace is a delta of one header page.
package delta

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrCorrupt is wrapped by every error about a malformed .delta or .meta file.
var ErrCorrupt = errors.New("corrupt incremental file")

// MaxMetaSize bounds the .meta files ParseMeta accepts.
const MaxMetaSize = 4096

// Page size bounds: InnoDB's innodb_page_size range and the ROW_FORMAT=COMPRESSED
// page sizes.
const (
	MinPageSize    = 1024
	MaxPageSize    = 65536
	MaxZipPageSize = 16384
)

// Meta is the content of a <file>.meta beside a <file>.delta.
type Meta struct {
	PageSize int    // the tablespace's page size
	ZipSize  int    // ROW_FORMAT=COMPRESSED page size, 0 if not compressed
	SpaceID  uint32 // the tablespace id the delta belongs to
	// Whole (ferry's "ferry_whole = 1", which mariadb-backup ignores) says the delta
	// holds every page of a file that replaced the base's since (imported, or
	// re-created under the same space id): applying it replaces the file instead of
	// writing its pages over the base's.
	Whole bool
}

// Physical returns the size of the pages stored in the delta: ZipSize if nonzero,
// else PageSize.
func (m Meta) Physical() int {
	if m.ZipSize != 0 {
		return m.ZipSize
	}
	return m.PageSize
}

// Bytes returns the .meta file as mariabackup writes it (with its space after the
// zip_size value), and a last line "ferry_whole = 1" if Whole is set.
func (m Meta) Bytes() []byte {
	b := fmt.Appendf(nil, "page_size = %d\nzip_size = %d \nspace_id = %d\n", m.PageSize, m.ZipSize, m.SpaceID)
	if m.Whole {
		b = append(b, wholeKey+" = 1\n"...)
	}
	return b
}

// wholeKey is the .meta key of Meta.Whole.
const wholeKey = "ferry_whole"

// ParseMeta decodes a .meta file: "key = value" lines with page_size, zip_size and
// space_id, each exactly once. Unknown keys are ignored (later versions may add some).
func ParseMeta(b []byte) (Meta, error) {
	if len(b) > MaxMetaSize {
		return Meta{}, fmt.Errorf("%w: .meta file of %d bytes (at most %d)", ErrCorrupt, len(b), MaxMetaSize)
	}
	vals := map[string]uint64{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Meta{}, fmt.Errorf("%w: .meta line %d %q is not \"key = value\"", ErrCorrupt, i+1, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if err := setMetaField(vals, k, v); err != nil {
			return Meta{}, fmt.Errorf("%w: .meta line %d: %w", ErrCorrupt, i+1, err)
		}
	}
	for _, k := range []string{"page_size", "zip_size", "space_id"} {
		if _, ok := vals[k]; !ok {
			return Meta{}, fmt.Errorf("%w: .meta has no %s", ErrCorrupt, k)
		}
	}
	m := Meta{PageSize: int(vals["page_size"]), ZipSize: int(vals["zip_size"]), SpaceID: uint32(vals["space_id"]), Whole: vals[wholeKey] != 0}
	if err := m.validate(); err != nil {
		return Meta{}, fmt.Errorf("%w: .meta: %w", ErrCorrupt, err)
	}
	return m, nil
}

func setMetaField(vals map[string]uint64, k, v string) error {
	switch k {
	case "page_size", "zip_size", "space_id", wholeKey:
	default:
		return nil
	}
	if _, dup := vals[k]; dup {
		return fmt.Errorf("%s given twice", k)
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("%s %q is not a 32-bit unsigned number", k, v)
	}
	vals[k] = n
	return nil
}

func (m Meta) validate() error {
	if !validPageSize(m.PageSize, MaxPageSize) {
		return fmt.Errorf("page_size %d is not a power of two from %d to %d", m.PageSize, MinPageSize, MaxPageSize)
	}
	if m.ZipSize != 0 && !validPageSize(m.ZipSize, MaxZipPageSize) {
		return fmt.Errorf("zip_size %d is neither 0 nor a power of two from %d to %d", m.ZipSize, MinPageSize, MaxZipPageSize)
	}
	return nil
}

func validPageSize(n, max int) bool {
	return n >= MinPageSize && n <= max && n&(n-1) == 0
}

func checkPageSize(n int) error {
	if !validPageSize(n, MaxPageSize) {
		return fmt.Errorf("delta: page size %d is not a power of two from %d to %d", n, MinPageSize, MaxPageSize)
	}
	return nil
}
