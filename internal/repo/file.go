package repo

import (
	"fmt"
	"sort"
	"sync"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
)

// File is one file of the backup being written. Several goroutines may write it at
// once, each its own range in order (the copy engine's segments): each range goes into
// its own parts.
type File struct {
	w     *Writer
	rel   string
	space *manifest.Space // the tablespace, as the copy read its page 0 (nil: another file)

	mu      sync.Mutex
	open    map[int64]*part // open parts by the offset their next byte goes to
	starts  map[int64]bool  // offsets where a part begins
	blobs   []manifest.Blob
	patches []manifest.Blob // pages copied again after Close, in the order written
	closed  bool
	idle    sync.WaitGroup // open parts another writer is sealing to free memory (sealIdle)
}

// part is a range of a file being encoded into one buffer.
type part struct {
	f          *File
	round      int // a patch's re-copy round; 0 for the file's own bytes
	start, raw int64
	crc        uint32 // of the raw bytes
	unit       *pipeline.Unit
	buf        *buffer
	reserved   int64
}

// Create starts a file of the backup, stored with the backup's compression and
// encryption (metadata too: objects are read through ferry, not by hand). A path
// already present is an error.
func (w *Writer) Create(rel string) (*File, error) { return w.CreateSpace(rel, nil, false) }

// CreateSpace starts a file that copies a tablespace (space, as the copy read its page
// 0), recorded in the index of each object holding its bytes, so a resumed backup can
// keep them. keep makes the file start with what an interrupted attempt stored of it
// (Held): the caller copies only the rest.
func (w *Writer) CreateSpace(rel string, space *manifest.Space, keep bool) (*File, error) {
	if err := w.Err(); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.files[rel]; ok {
		return nil, fmt.Errorf("repository backup: %s created twice (internal error)", rel)
	}
	f := &File{w: w, rel: rel, space: space, open: map[int64]*part{}, starts: map[int64]bool{}}
	if keep {
		w.keep(f)
	}
	w.files[rel] = f
	return f, nil
}

// newPart starts a part of f at raw offset off.
func (f *File) newPart(off int64) (*part, error) {
	buf := &buffer{pool: &f.w.pool}
	u, err := f.w.enc.Start("repository "+f.rel, buf, true)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.starts[off] = true
	f.mu.Unlock()
	return &part{f: f, start: off, unit: u, buf: buf}, nil
}

// need is the budget a write of n more raw bytes may take once encoded: the worst
// case of the compressors (incompressible data grows by under 1%), the frame headers,
// and the age header and tags.
func (p *part) need(n int) int64 {
	k := int64(n) + int64(n)/128 + 256
	if p.raw == 0 {
		k += 4096 + 512*int64(len(p.f.w.o.Pipeline.Recipients))
	}
	return k
}

// WriteAt writes p at off: the continuation of a range already being written, or the
// start of a new one.
func (f *File) WriteAt(p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	pt, err := f.take(off)
	if err != nil {
		return err
	}
	for len(p) > 0 {
		if pt.raw == f.w.o.PartSize {
			if err := pt.seal(); err != nil {
				return err
			}
			if pt, err = f.newPart(off); err != nil {
				return err
			}
		}
		k := int(min(int64(len(p)), f.w.o.PartSize-pt.raw))
		if pt, err = f.reserve(pt, k, off); err != nil {
			return err
		}
		if _, err := pt.unit.Write(p[:k]); err != nil {
			return f.w.fail(err)
		}
		pt.crc = checksum.Update(pt.crc, p[:k])
		pt.raw += int64(k)
		p, off = p[k:], off+int64(k)
	}
	return f.putBack(pt, off)
}

// take claims the open part that ends at off, or starts one there. The start is marked
// at once, under the same lock: a range ending at off meanwhile is then sealed by its
// putBack, not left open beside the new part, idle (pinning a block and budget) until
// the file is closed.
func (f *File) take(off int64) (*part, error) {
	f.mu.Lock()
	pt, ok := f.open[off]
	delete(f.open, off)
	closed := f.closed
	if !ok && !closed {
		f.starts[off] = true
	}
	f.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("repository backup: write to %s after close (internal error)", f.rel)
	}
	if ok {
		return pt, nil
	}
	return f.newPart(off)
}

// putBack keeps pt open for the next write at off, unless another range already starts
// there: then pt can never grow (its writer finished a segment) and is sealed now, so
// idle parts never pin memory.
func (f *File) putBack(pt *part, off int64) error {
	f.mu.Lock()
	if !f.starts[off] {
		f.open[off] = pt
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	return pt.seal()
}

// reserve takes budget for k raw bytes of pt. If memory is short with nothing
// uploading, pt is cut short (sealed and replaced by a new part at off), or the pack
// is flushed; the part to write to is returned.
func (f *File) reserve(pt *part, k int, off int64) (*part, error) {
	var cutErr error
	relieve := func() bool {
		if pt.raw == 0 {
			return f.w.flushPack() || f.w.sealIdle()
		}
		if cutErr = pt.seal(); cutErr != nil {
			return false
		}
		pt, cutErr = f.newPart(off)
		return cutErr == nil
	}
	n, err := f.w.mem.reserve(f.w.ctx, func() int64 { return pt.need(k) }, relieve)
	if cutErr != nil {
		return nil, cutErr
	}
	if err != nil {
		return nil, f.w.fail(err)
	}
	pt.reserved += n
	return pt, nil
}

// sealIdle seals the largest part left open between writes by any file (a range
// between two writes, or a file's last range waiting for the file's Close while other
// ranges are copied), to free the budget it holds; false if there is none. Idle parts
// could otherwise hold all of it with no writer able to cut its own. The range's next
// write, if any, starts a new part.
func (w *Writer) sealIdle() bool {
	w.mu.Lock()
	files := make([]*File, 0, len(w.files))
	for _, f := range w.files {
		files = append(files, f)
	}
	w.mu.Unlock()
	var best *part
	var at int64
	for _, f := range files {
		f.mu.Lock()
		for off, pt := range f.open {
			if best == nil || pt.reserved > best.reserved {
				best, at = pt, off
			}
		}
		f.mu.Unlock()
	}
	if best == nil {
		return false
	}
	f := best.f
	f.mu.Lock()
	if f.open[at] != best {
		f.mu.Unlock()
		return true // its writer took it back: memory is moving, look again
	}
	delete(f.open, at)
	f.idle.Add(1)
	f.mu.Unlock()
	defer f.idle.Done()
	return best.seal() == nil
}

// seal finishes the part's encoding and stores it: as its own object, or in a pack if
// small. Its blob is recorded in the file.
func (p *part) seal() error {
	w := p.f.w
	if err := p.unit.Close(); err != nil {
		p.buf.release()
		w.mem.release(p.reserved)
		return w.fail(err)
	}
	if p.raw == 0 {
		p.buf.release()
		w.mem.release(p.reserved)
		return nil
	}
	b := manifest.Blob{RawOffset: p.start, RawSize: p.raw, CRC32C: checksum.Hex(p.crc),
		StoredSize: p.buf.n, StoredCRC32C: checksum.Hex(p.buf.crc), Round: p.round}
	var e *indexEntry
	if p.round == 0 && p.f.space != nil {
		e = &indexEntry{Path: p.f.rel, Space: p.f.space}
	}
	if p.buf.n < w.o.packThreshold() {
		w.mem.release(p.reserved - p.buf.n) // the pack holds the rest
		w.addToPack(&b, e, p.buf)
		p.buf.release()
	} else {
		b.Object = w.newObject()
		var ix []indexEntry
		if e != nil {
			e.Blob = b
			ix = []indexEntry{*e}
		}
		p.buf.Write(encodeIndex(p.buf.n, p.buf.crc, w.since.Load(), ix))
		w.mem.seal(p.reserved, p.buf.n)
		w.enqueue(b.Object, p.buf, w.ups.start())
	}
	p.f.mu.Lock()
	if p.round > 0 {
		p.f.patches = append(p.f.patches, b)
	} else {
		p.f.blobs = append(p.f.blobs, b)
	}
	p.f.mu.Unlock()
	return nil
}

// Patch stores p, the bytes at off of a closed file copied again in re-copy round
// round, as parts of their own that a restore applies over the file's blobs, round by
// round (the patches of one round must not overlap). The file's blobs and CRC-32C stay
// those of what the copy first wrote.
func (w *Writer) Patch(round int, rel string, off int64, p []byte) error {
	if err := w.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	f, ok := w.files[rel]
	w.mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("repository backup: patch %s: no such file (internal error)", rel)
	case round < 1:
		return fmt.Errorf("repository backup: patch %s in round %d (internal error)", rel, round)
	}
	for len(p) > 0 {
		k := int(min(int64(len(p)), w.o.PartSize))
		if err := f.writePatch(round, off, p[:k]); err != nil {
			return err
		}
		p, off = p[k:], off+int64(k)
	}
	return nil
}

// writePatch encodes p (at most a part) as one patch part and seals it.
func (f *File) writePatch(round int, off int64, p []byte) error {
	buf := &buffer{pool: &f.w.pool}
	u, err := f.w.enc.Start("repository "+f.rel+" (pages copied again)", buf, true)
	if err != nil {
		return err
	}
	pt := &part{f: f, round: round, start: off, unit: u, buf: buf}
	if pt, err = f.reserve(pt, len(p), off); err != nil {
		return err
	}
	if _, err := pt.unit.Write(p); err != nil {
		return f.w.fail(err)
	}
	pt.crc, pt.raw = checksum.Sum(p), int64(len(p))
	return pt.seal()
}

// Close seals the file's open parts. size is the file's size: 0 drops what was
// written (a file that vanished while being copied); otherwise every blob must lie
// within it (bytes no blob covers are zeros, as in a sparse copy).
func (f *File) Close(size int64) error {
	f.mu.Lock()
	parts := make([]*part, 0, len(f.open))
	for _, pt := range f.open {
		parts = append(parts, pt)
	}
	f.open, f.closed = map[int64]*part{}, true
	f.mu.Unlock()
	for _, pt := range parts {
		if err := pt.seal(); err != nil {
			return err
		}
	}
	f.idle.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if size == 0 {
		f.blobs = nil
	}
	sort.Slice(f.blobs, func(a, b int) bool { return f.blobs[a].RawOffset < f.blobs[b].RawOffset })
	if k := len(f.blobs); k > 0 && f.blobs[k-1].RawOffset+f.blobs[k-1].RawSize > size {
		return fmt.Errorf("repository backup: %s has data past its size %d (internal error)", f.rel, size)
	}
	return nil
}
