package verify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
)

// A .delta file (mariabackup's format) is a sequence of clusters, each one header page
// and up to pageSize/4-1 page images. The header starts with "xtra" ("XTRA" in the
// last cluster), then the big-endian number of each page that follows, counted from
// the start of the file, and 0xFFFFFFFF after the last when the cluster is not full.
const (
	deltaMagic     = 0x78747261 // "xtra"
	deltaMagicLast = 0x58545241 // "XTRA"
	deltaListEnd   = 0xFFFFFFFF
)

// checkDelta validates the pages of a blob of a delta: every header page is well
// formed, and every page image passes the page check at the number its header lists.
// A blob that starts inside a cluster does not hold that cluster's header: its pages
// are checked at the number they carry (checksums, not position). note, if not nil,
// is given each page's number relative to the file.
func checkDelta(f *manifest.File, b *manifest.Blob, r io.Reader, progress func(int64), note func(uint32)) (int64, error) {
	c, ps, err := checker(f, b)
	if err != nil {
		return 0, err
	}
	cluster := ps * (ps / 4)
	page := make([]byte, ps)
	var pages int64
	var listed []uint32
	known := false // listed is the header of the cluster being read
	for off := b.RawOffset; ; off += ps {
		n, err := io.ReadFull(r, page)
		progress(int64(n))
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return pages, nil // a short tail fails the blob's size check
		}
		if err != nil {
			return pages, err
		}
		idx := int(off % cluster / ps)
		if idx == 0 {
			if listed, err = deltaHeader(page); err != nil {
				return pages, fmt.Errorf("%w: %s: the cluster header at byte %d %v", repo.ErrDamaged, f.Path, off, err)
			}
			known = true
			continue
		}
		pageNo := innodb.PageNo(page)
		if known {
			if idx > len(listed) {
				return pages, fmt.Errorf("%w: %s: the page at byte %d is past the %d pages its cluster header lists", repo.ErrDamaged, f.Path, off, len(listed))
			}
			pageNo = listed[idx-1] + f.Space.FirstPage
		}
		if cerr := c.Check(page, pageNo); cerr != nil {
			return pages, fmt.Errorf("%w: %s: page %d (at byte %d) is not valid: %v", repo.ErrDamaged, f.Path, pageNo, off, cerr)
		}
		if note != nil {
			note(pageNo - f.Space.FirstPage)
		}
		pages++
	}
}

// deltaHeader returns the page numbers a cluster header lists.
func deltaHeader(h []byte) ([]uint32, error) {
	if m := binary.BigEndian.Uint32(h); m != deltaMagic && m != deltaMagicLast {
		return nil, fmt.Errorf("starts with %08x, not \"xtra\" or \"XTRA\"", m)
	}
	var out []uint32
	for i := 4; i+4 <= len(h); i += 4 {
		v := binary.BigEndian.Uint32(h[i:])
		if v == deltaListEnd {
			break
		}
		out = append(out, v)
	}
	return out, nil
}
