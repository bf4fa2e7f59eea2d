package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"

	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// freeMap is what one segment's copy knows of its tablespace's extent descriptors:
// the pages they mark free are stored as zeros (holes in a sparse directory copy)
// instead of their stale bytes, and are neither validated nor re-read; a chunk whose
// pages are all free is not read at all.
//
// Why a page free in a descriptor read during the copy holds nothing the restore
// needs (docs/backup-format.md, "Free pages"). The copy starts after the checkpoint
// C the backup's redo starts from, so every page image it reads holds every change
// logged before C: a descriptor page read at any moment of the copy tells the
// allocation state of its pages at some moment Y >= C (its own FIL_PAGE_LSN, or C if
// it has not changed since). A page free at Y is, in the redo from C:
//   - untouched: nothing reads it, and its bytes stay what the copy stored;
//   - allocated after Y: the page's INIT_PAGE is logged by the allocating
//     mini-transaction or by one committed after it (fseg_alloc_free_page_general's
//     init_mtr; the bulk BLOB path commits its allocating one first), so after Y,
//     and recovery applies it to a fresh frame without reading the page
//     (redo-apply.md 5.2);
//   - written between C and Y: then it was freed before Y, the freeing logs
//     FREE_PAGE, and FREE_PAGE drops every earlier record of the page (5.3): the
//     page is left as the copy stored it, free.
//
// So recovery from C never reads the page's bytes, whenever the page itself is read
// (before or after its descriptor). The three-stage copy keeps redo from a later
// checkpoint C2 only after copying again every page the redo changed between C and
// C2 (those copies keep their bytes), and a page unchanged in that window is still
// free at C2. The server itself leaves freed pages zeroed with
// innodb_immediate_scrub_data_uncompressed. Should the argument ever fail (a page
// with records but no INIT_PAGE after its zeroing), ferry's redo apply refuses the
// all-zero page and the server's recovery reports it corrupt: it cannot restore
// wrong data silently.
//
// Only file-per-table tablespaces (.ibd) with a valid page 0 are mapped: the system
// and undo tablespaces (truncated and shrunk in place) keep every byte.
type freeMap struct {
	flags innodb.SpaceFlags
	phys  int64             // physical page size
	limit uint32            // FSP_FREE_LIMIT of page 0 (valid once page 0 is held)
	descs map[uint32][]byte // descriptor pages read by this segment; nil: unusable
	reads int               // descriptor pages read on their own (not with a chunk)
}

// maxDescs bounds the descriptor pages a segment holds (it reads in page order, so
// it needs only the latest ones).
const maxDescs = 8

// newFreeMap returns the map for a segment of ij, or nil where free pages are copied
// as they are.
func (j *job) newFreeMap(ij *innoJob) *freeMap {
	if !j.mapsFree(ij) {
		return nil
	}
	f := ij.header.Flags
	return &freeMap{flags: f, phys: int64(f.PhysicalSize()), descs: map[uint32][]byte{}}
}

// mapsFree tells whether the copy of ij stores its free pages as zeros (where the
// server's family allows it: Layout.freeAsZeros).
func (j *job) mapsFree(ij *innoJob) bool {
	return !j.cfg.KeepFreePages && j.layout().freeAsZeros() && ij.checker != nil && !ij.src.System && strings.HasSuffix(ij.src.Rel, ".ibd")
}

// holes tells whether the copy of ij goes to a directory where its free pages are
// left as holes: a stream, a repository or a clone gets them as zeros (which
// compress to nothing), and a restore or clone writes the datadir as the source's.
func (j *job) holes(ij *innoJob) bool {
	return j.mapsFree(ij) && j.sink.Caps().Storage.Format == manifest.StorageDir
}

// readChunkFree is readChunk for a segment with a free map: the descriptors of the
// chunk's pages that it does not hold are read first, then the chunk; its free pages
// are zeroed before the others are validated.
func (j *job) readChunkFree(ctx context.Context, in *directio.File, ij *innoJob, m *freeMap, buf []byte, off int64) (int, error) {
	if m == nil {
		return j.readChunk(ctx, in, ij, buf, off)
	}
	if err := m.load(in, ij, off, int64(len(buf))); err != nil {
		return 0, err
	}
	if off+int64(len(buf)) <= ij.src.Size && m.allFree(off, len(buf)) {
		// Not read at all: the file held these bytes when the backup planned it, and an
		// .ibd file never shrinks in place (a rebuild makes a new file, which the DDL
		// reconciliation copies again).
		clear(buf)
		j.stats.freePages.Add(int64(len(buf)) / m.phys)
		return len(buf), nil
	}
	n, err := j.readRaw(ctx, in, ij, buf, off)
	if err != nil || n == 0 {
		return 0, err
	}
	m.take(ij, buf[:n], off)
	if z := m.clear(buf[:n], off); z > 0 {
		j.stats.freePages.Add(z)
	}
	if err := j.validate(ctx, in, ij, buf[:n], off); err != nil {
		return 0, err
	}
	return n, nil
}

// load reads, each on its own, page 0 and the descriptor pages of the pages in
// [off, off+n) that the map does not hold yet and that the chunk itself does not
// hold (those take takes from the chunk once read).
func (m *freeMap) load(in *directio.File, ij *innoJob, off, n int64) error {
	inChunk := func(d uint32) bool { return int64(d)*m.phys >= off && int64(d)*m.phys < off+n }
	if _, ok := m.descs[0]; !ok && !inChunk(0) {
		p, err := readDescriptor(in, ij, 0, m.phys)
		if err != nil {
			return err
		}
		m.descs[0], m.limit = p, innodb.FreeLimit(p)
		m.reads++
	}
	first, last := uint32(off/m.phys), uint32((off+n-1)/m.phys)
	for d := innodb.DescriptorPage(m.flags, first); d <= last; d += uint32(m.flags.PhysicalSize()) {
		if _, ok := m.descs[d]; ok || inChunk(d) || m.descs[0] != nil && d >= m.limit {
			continue // held, read with the chunk, or past the free limit: all its pages are free
		}
		if len(m.descs) >= maxDescs {
			m.descs = map[uint32][]byte{0: m.descs[0]}
		}
		p, err := readDescriptor(in, ij, d, m.phys)
		if err != nil {
			return err
		}
		m.descs[d] = p
		m.reads++
	}
	return nil
}

// take keeps the descriptor pages (page 0 among them) of b, read at off, that the
// map does not hold yet, each if it validates (else nil: nothing in its range is
// free). A descriptor need not be read before the pages it describes: whenever it is
// read, it tells their state at a moment after the backup's checkpoint.
func (m *freeMap) take(ij *innoJob, b []byte, off int64) {
	for i := int64(0); i+m.phys <= int64(len(b)); i += m.phys {
		no := uint32((off + i) / m.phys)
		if _, ok := m.descs[no]; ok || innodb.DescriptorPage(m.flags, no) != no {
			continue
		}
		m.descs[no] = validDescriptor(ij, b[i:i+m.phys], no)
		if no == 0 {
			m.limit = innodb.FreeLimit(m.descs[0])
		}
	}
}

// readDescriptor reads page no alone and returns it if it validates as that page and
// is not all zeros, else nil (nothing in its range is taken as free).
func readDescriptor(in *directio.File, ij *innoJob, no uint32, phys int64) ([]byte, error) {
	off := int64(no) * phys
	aoff := off &^ (directio.Align - 1)
	buf := directio.AlignedBuffer(int(off - aoff + phys))
	k, err := in.ReadAt(buf, aoff)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if int64(k) < off-aoff+phys {
		return nil, nil
	}
	return validDescriptor(ij, buf[off-aoff:off-aoff+phys], no), nil
}

// validDescriptor returns a copy of page p (page no), or nil if it is all zeros or
// does not validate as that page.
func validDescriptor(ij *innoJob, p []byte, no uint32) []byte {
	if innodb.IsZero(p) || ij.checker.Check(p, no) != nil {
		return nil
	}
	return bytes.Clone(p)
}

// allFree tells whether the map marks every page of the n bytes at off free.
func (m *freeMap) allFree(off int64, n int) bool {
	if n <= 0 || off%m.phys != 0 || int64(n)%m.phys != 0 {
		return false
	}
	for i := int64(0); i < int64(n); i += m.phys {
		if !m.free(uint32((off + i) / m.phys)) {
			return false
		}
	}
	return true
}

// free tells whether the map marks page no free. Descriptor and change-buffer bitmap
// pages, and pages of a range whose descriptor was not read or did not validate, are
// never free; without a valid page 0 (no free limit to trust) none is.
func (m *freeMap) free(no uint32) bool {
	if m.descs[0] == nil {
		return false
	}
	d := innodb.DescriptorPage(m.flags, no)
	if d == no || no == d+1 {
		return false
	}
	desc, held := m.descs[d]
	if no < m.limit && (!held || desc == nil) {
		return false
	}
	return innodb.PageFree(desc, m.flags, m.limit, no)
}

// clear zeroes the pages of b (read at off) that the map marks free and returns how
// many it zeroed.
func (m *freeMap) clear(b []byte, off int64) int64 {
	var z int64
	for i := int64(0); i+m.phys <= int64(len(b)); i += m.phys {
		if m.free(uint32((off + i) / m.phys)) {
			clear(b[i : i+m.phys])
			z++
		}
	}
	return z
}
