package delta

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Reader reads the pages of a .delta file in order, checking its structure as it
// goes: the magics, that every cluster but the last is full, that the listed pages
// are in the file, that page numbers increase and that nothing follows the last
// cluster.
type Reader struct {
	r        io.ReaderAt
	size     int64
	pageSize int
	next     int64    // offset of the next cluster's header
	nos      []uint32 // page numbers of the current cluster
	idx      int      // next page of the current cluster
	data     int64    // offset of the current cluster's first data page
	last     bool     // the current cluster is the last one
	started  bool
	prev     uint32 // the last page number listed
	seen     bool   // a page number was listed
	hdr      []byte
	batch    []byte // pages read ahead in one read: batch[bi*pageSize:] is the next
	bi, bn   int
	err      error // sticky
}

// readAhead is how many pages of a cluster Next reads at once.
const readAhead = 64

// NewReader returns a Reader of the delta held in r's first size bytes, whose pages
// are pageSize bytes (Meta.Physical).
func NewReader(r io.ReaderAt, size int64, pageSize int) *Reader {
	return &Reader{r: r, size: size, pageSize: pageSize}
}

// Next returns the next page and its number, or io.EOF after the last one. The page
// is valid until the next call. Errors about the file's content wrap ErrCorrupt.
func (r *Reader) Next() (uint32, []byte, error) {
	if r.err != nil {
		return 0, nil, r.err
	}
	for r.idx == len(r.nos) {
		if r.last {
			r.err = io.EOF
			return 0, nil, r.err
		}
		if r.err = r.readCluster(); r.err != nil {
			return 0, nil, r.err
		}
	}
	if r.bi == r.bn {
		n := min(readAhead, len(r.nos)-r.idx)
		off := r.data + int64(r.idx)*int64(r.pageSize)
		if err := r.readAt(r.batch[:n*r.pageSize], off); err != nil {
			r.err = err
			return 0, nil, err
		}
		r.bi, r.bn = 0, n
	}
	page := r.batch[r.bi*r.pageSize : (r.bi+1)*r.pageSize]
	no := r.nos[r.idx]
	r.idx, r.bi = r.idx+1, r.bi+1
	return no, page, nil
}

// check reads the cluster headers to the end without reading the pages, checking
// the file's structure.
func (r *Reader) check() error {
	for !r.last {
		if err := r.readCluster(); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func (r *Reader) start() error {
	if err := checkPageSize(r.pageSize); err != nil {
		return err
	}
	switch {
	case r.size < int64(r.pageSize):
		return r.corrupt("delta of %d bytes is shorter than one %d-byte header page", r.size, r.pageSize)
	case r.size%int64(r.pageSize) != 0:
		return r.corrupt("delta size %d is not a multiple of the page size %d", r.size, r.pageSize)
	}
	r.hdr = make([]byte, r.pageSize)
	r.batch = make([]byte, readAhead*r.pageSize)
	r.started = true
	return nil
}

// readCluster reads the header of the cluster at r.next and checks it.
func (r *Reader) readCluster() error {
	if !r.started {
		if err := r.start(); err != nil {
			return err
		}
	}
	off := r.next
	if off >= r.size {
		return r.corrupt("delta ends at byte %d without a last (XTRA) cluster", r.size)
	}
	if err := r.readAt(r.hdr, off); err != nil {
		return err
	}
	switch magic := binary.BigEndian.Uint32(r.hdr); magic {
	case magicMore:
	case magicLast:
		r.last = true
	default:
		return r.corrupt("cluster at byte %d starts with %#08x, not \"xtra\" or \"XTRA\"", off, magic)
	}
	if err := r.parseList(off); err != nil {
		return err
	}
	end := off + int64(1+len(r.nos))*int64(r.pageSize)
	switch {
	case end > r.size:
		return r.corrupt("cluster at byte %d lists %d pages but the delta ends at byte %d", off, len(r.nos), r.size)
	case r.last && end != r.size:
		return r.corrupt("%d bytes follow the last cluster (ending at byte %d)", r.size-end, end)
	}
	r.data, r.next, r.idx, r.bi, r.bn = off+int64(r.pageSize), end, 0, 0, 0
	return nil
}

// parseList reads the page numbers of the header in r.hdr.
func (r *Reader) parseList(off int64) error {
	r.nos = r.nos[:0]
	for i := range ClusterPages(r.pageSize) {
		no := binary.BigEndian.Uint32(r.hdr[4+4*i:])
		if no == endOfList {
			break
		}
		if r.seen && no <= r.prev {
			return r.corrupt("cluster at byte %d lists page %d after page %d: page numbers must increase", off, no, r.prev)
		}
		r.nos = append(r.nos, no)
		r.prev, r.seen = no, true
	}
	if !r.last && len(r.nos) != ClusterPages(r.pageSize) {
		return r.corrupt("cluster at byte %d is marked \"xtra\" (not the last) but holds %d pages, not %d", off, len(r.nos), ClusterPages(r.pageSize))
	}
	return nil
}

func (r *Reader) readAt(b []byte, off int64) error {
	n, err := r.r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		return r.corrupt("delta truncated at byte %d", off+int64(n))
	}
	return fmt.Errorf("delta: read at byte %d: %w", off, err)
}
