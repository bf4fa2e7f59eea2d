package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/storage"
	"golang.org/x/sync/errgroup"
)

// A resumed backup (docs/repository.md, "Resuming a backup") continues an interrupted
// one under the same id: the objects the interrupted attempts stored stay, and the
// ranges of tablespaces they hold are kept where the tablespace is still the same file;
// the copy then reads those ranges again only to patch the pages changed since
// (sink.Resumable), and copies the rest.

// heldBlob is a range of a tablespace an earlier attempt stored.
type heldBlob struct {
	blob  manifest.Blob
	space *manifest.Space
	since uint64
}

// Kept counts what a resumed backup kept of its earlier attempts.
type Kept struct {
	Objects int   // objects of earlier attempts, all kept in the backup
	Bytes   int64 // their stored bytes
	Files   int   // tablespaces whose stored ranges were kept
	Raw     int64 // the raw bytes of those ranges: not read from the server's disk to send again
}

// ErrNothingToResume means the repository holds no interrupted backup to resume.
var ErrNothingToResume = errors.New("nothing to resume")

// Interrupted returns the newest unfinished backup this host started, if no complete
// backup came after it: the one a resumed backup continues. It refuses one still
// running and an incremental. Unfinished backups an older ferry or a copy (ferry
// copy) left, which record no encoding, are passed over.
func (r *Repo) Interrupted(ctx context.Context) (Entry, error) {
	list, err := r.List(ctx)
	if err != nil {
		return Entry{}, err
	}
	host, _ := os.Hostname()
	for _, e := range slices.Backward(list) {
		if e.Status == StatusComplete {
			return Entry{}, setting.Errorf("%w: the newest backup in %s, %s, is complete; take a new backup without %s", ErrNothingToResume, r.Location(), e.ID, setting.Resume)
		}
		if e.Marker == nil || e.Marker.Host != host || e.Marker.Storage == nil {
			continue
		}
		switch {
		case e.Status == StatusRunning:
			return e, fmt.Errorf("backup %s in %s is still running (ferry pid %d): wait for it or stop it first", e.ID, r.Location(), e.Marker.PID)
		case e.Marker.Base != "":
			return e, setting.Errorf("the interrupted backup %s in %s is an incremental, which is not resumed: take it again without %s", e.ID, r.Location(), setting.Resume)
		}
		return e, nil
	}
	return Entry{}, setting.Errorf("%w: %s holds no interrupted backup of this host (%s); take a backup without %s", ErrNothingToResume, r.Location(), host, setting.Resume)
}

// ResumeBackup continues the interrupted backup e (Interrupted): it checks that o
// encodes as the backup did, reads the index of every object stored so far, and
// writes a new in-progress marker. The caller must Commit or Abort.
func (r *Repo) ResumeBackup(ctx context.Context, e Entry, o WriterOptions) (*Writer, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	mk := o.marker(e.ID, e.Marker.Resumed+1)
	if err := sameEncoding(*e.Marker, mk); err != nil {
		return nil, setting.Errorf("backup %s cannot be resumed with these settings: %w; resume it as it was started, or take a new backup without %s", e.ID, err, setting.Resume)
	}
	locker, err := r.resumeLock(ctx, *e.Marker, o)
	if err != nil {
		return nil, setting.Errorf("backup %s cannot be resumed with these settings: %w; resume it as it was started, or take a new backup without %s", e.ID, err, setting.Resume)
	}
	mk.Lock = e.Marker.Lock // the objects kept are locked until that date already
	st, err := r.readIndexes(ctx, e.ID, o.SignWith != nil)
	if err != nil {
		return nil, fmt.Errorf("resume backup %s: %w", e.ID, err)
	}
	enc, err := pipeline.NewEncoder(o.Pipeline)
	if err != nil {
		return nil, err
	}
	if err := putJSON(ctx, r.st, backupPrefix(e.ID)+markerName, mk); err != nil {
		enc.Close()
		return nil, fmt.Errorf("resume backup %s in %s: %w", e.ID, r.Location(), err)
	}
	w := r.startWriter(ctx, e.ID, o, enc, mk.Lock, locker)
	w.objects, w.nextObj, w.held = st.objects, st.next, st.held
	w.kept = Kept{Objects: len(st.objects)}
	for _, ob := range st.objects {
		w.kept.Bytes += ob.Size
	}
	o.Log.Info("resuming an interrupted backup", "id", e.ID, "attempt", mk.Resumed+1, "objects_kept", w.kept.Objects,
		"stored_bytes_kept", w.kept.Bytes, "objects_without_index", st.unindexed)
	return w, nil
}

// sameEncoding refuses to resume with another compression, encryption or part size:
// the kept objects stay as they were written.
func sameEncoding(was, now Marker) error {
	a, b := *was.Storage, *now.Storage
	switch {
	case a.Compression != b.Compression:
		return fmt.Errorf("it was compressed with %q, not %q", codecName(a.Compression), codecName(b.Compression))
	case a.Encryption != b.Encryption || !slices.Equal(was.Recipients, now.Recipients):
		return errors.New("it was encrypted to other recipients")
	case a.PartSize != b.PartSize:
		return fmt.Errorf("its parts are %d bytes, not %d", a.PartSize, b.PartSize)
	}
	return nil
}

func codecName(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// resumeLock checks that a resumed backup locks its objects as the interrupted one
// did, and returns the storage's Locker if it does.
func (r *Repo) resumeLock(ctx context.Context, was Marker, o WriterOptions) (storage.Locker, error) {
	switch {
	case was.Lock == nil && o.LockFor == 0:
		return nil, nil
	case was.Lock == nil:
		return nil, errors.New("it was not stored with an Object Lock")
	case o.LockFor == 0:
		return nil, fmt.Errorf("it was stored with an Object Lock until %s", was.Lock.RetainUntil.Format(time.RFC3339))
	case !strings.EqualFold(string(was.Lock.Mode), string(o.LockMode)) && o.LockMode != "":
		return nil, fmt.Errorf("it was locked in %s mode", was.Lock.Mode)
	}
	return r.CanLock(ctx)
}

// stored is what the interrupted attempts of a backup left.
type stored struct {
	objects   []manifest.Object
	next      int // the next object number
	held      map[string][]heldBlob
	unindexed int // objects without a readable index: left out of the backup
}

// readIndexes reads the index trailer of every object of backup id (whole objects
// when hash is set, for their SHA-256).
func (r *Repo) readIndexes(ctx context.Context, id string, hash bool) (*stored, error) {
	var infos []storage.ObjectInfo
	err := r.st.List(ctx, backupPrefix(id)+objectsDir, func(oi storage.ObjectInfo) error {
		infos = append(infos, oi)
		return nil
	})
	if err != nil {
		return nil, err
	}
	st := &stored{held: map[string][]heldBlob{}}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, oi := range infos {
		name := strings.TrimPrefix(oi.Key, backupPrefix(id))
		n, err := strconv.Atoi(strings.TrimPrefix(name, objectsDir))
		if err != nil || n < 0 || name != fmt.Sprintf("%s%08d", objectsDir, n) {
			continue // not an object of ferry's
		}
		st.next = max(st.next, n+1)
		g.Go(func() error {
			ob, ix, err := r.readIndex(gctx, id, name, oi.Size, hash)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errNoIndex) || errors.Is(err, ErrDamaged):
				st.unindexed++
				return nil
			case err != nil:
				return err
			}
			st.objects = append(st.objects, ob)
			for _, e := range ix.Blobs {
				e.Blob.Object = name
				st.held[e.Path] = append(st.held[e.Path], heldBlob{blob: e.Blob, space: e.Space, since: ix.Since})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sort.Slice(st.objects, func(a, b int) bool { return st.objects[a].Key < st.objects[b].Key })
	return st, nil
}

// readIndex reads one object's index: its trailer, or the whole object if hash is set.
func (r *Repo) readIndex(ctx context.Context, id, name string, size int64, hash bool) (manifest.Object, *objectIndex, error) {
	key := ObjectKey(id, name)
	ob := manifest.Object{Key: name, Size: size}
	var ix *objectIndex
	var crc uint32
	if hash {
		err := r.st.Get(ctx, key, 0, -1, func(rd io.Reader) error {
			h, sum := crc32.New(checksum.Table), sha256.New()
			tail := &tailBuffer{max: maxIndex + int64(indexTail)}
			n, err := io.Copy(io.MultiWriter(h, sum, tail), rd)
			if err != nil {
				return err
			}
			if n != size {
				return fmt.Errorf("%w: %d bytes read, %d listed", ErrDamaged, n, size)
			}
			if ix, crc, err = decodeIndex(tail.b, size); err != nil {
				return err
			}
			if crc != h.Sum32() {
				return fmt.Errorf("%w: its CRC-32C is not the one its index implies", ErrDamaged)
			}
			ob.SHA256 = hex.EncodeToString(sum.Sum(nil))
			return nil
		})
		ob.CRC32C = checksum.Hex(crc)
		return ob, ix, err
	}
	tail, err := r.tail(ctx, key, size, min(size, 64<<10))
	if err != nil {
		return ob, nil, err
	}
	if n, err := indexLen(tail, size); err == nil && n+int64(indexTail) > int64(len(tail)) {
		if tail, err = r.tail(ctx, key, size, n+int64(indexTail)); err != nil {
			return ob, nil, err
		}
	}
	ix, crc, err = decodeIndex(tail, size)
	ob.CRC32C = checksum.Hex(crc)
	return ob, ix, err
}

// tail reads the last n bytes of an object of size bytes.
func (r *Repo) tail(ctx context.Context, key string, size, n int64) ([]byte, error) {
	var b []byte
	err := r.st.Get(ctx, key, size-n, n, func(rd io.Reader) error {
		var err error
		b, err = io.ReadAll(io.LimitReader(rd, n))
		return err
	})
	if err == nil && int64(len(b)) != n {
		err = fmt.Errorf("%w: read %d of its last %d bytes", ErrDamaged, len(b), n)
	}
	return b, err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	b   []byte
	max int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := int64(len(t.b)) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

// Held returns the ranges of rel the interrupted attempts stored, if the tablespace is
// still the file they read (same space id, flags and file identity) and they do not
// overlap; none otherwise. Each range's Since is the LSN its attempt's copy began at.
func (w *Writer) Held(rel string, space *manifest.Space) []sink.Held {
	w.mu.Lock()
	hb := w.held[rel]
	w.mu.Unlock()
	if len(hb) == 0 || !sameFile(hb[0].space, space) {
		return nil
	}
	hb = slices.Clone(hb)
	sort.Slice(hb, func(a, b int) bool { return hb[a].blob.RawOffset < hb[b].blob.RawOffset })
	out := make([]sink.Held, 0, len(hb))
	var end int64
	for _, h := range hb {
		crc, err := parseCRC(h.blob.CRC32C)
		if err != nil || !sameFile(h.space, space) || h.blob.RawOffset < end || h.since == 0 {
			return nil
		}
		end = h.blob.RawOffset + h.blob.RawSize
		out = append(out, sink.Held{Off: h.blob.RawOffset, Len: h.blob.RawSize, CRC: crc, Since: h.since})
	}
	return out
}

// sameFile tells whether two page-0 readings are of the same tablespace file.
func sameFile(a, b *manifest.Space) bool {
	if a == nil || b == nil || a.Identity == nil || b.Identity == nil {
		return false
	}
	return a.ID == b.ID && a.Flags == b.Flags && a.System == b.System && a.FirstPage == b.FirstPage &&
		a.Identity.Inode == b.Identity.Inode && a.Identity.BirthNS == b.Identity.BirthNS
}

// keep starts f with the blobs the interrupted attempts stored of it (w.mu held).
func (w *Writer) keep(f *File) {
	for _, h := range w.held[f.rel] {
		f.blobs = append(f.blobs, h.blob)
		f.starts[h.blob.RawOffset] = true
		w.kept.Raw += h.blob.RawSize
	}
	w.kept.Files++
	delete(w.held, f.rel)
}

// HeldSince is the lowest start LSN of the attempts whose ranges are held (0: none).
func (w *Writer) HeldSince() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var low uint64
	for _, hb := range w.held {
		for _, h := range hb {
			if h.since > 0 && (low == 0 || h.since < low) {
				low = h.since
			}
		}
	}
	return low
}

// SetSince records the LSN the copy starts at in the index of every object written
// from now on.
func (w *Writer) SetSince(lsn uint64) { w.since.Store(lsn) }

// Kept is what a resumed backup kept of its earlier attempts (zero for a new backup).
func (w *Writer) Kept() Kept {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kept
}
