package repo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/storage"
	"golang.org/x/sync/errgroup"
)

// The binlog archive's prefixes (internal/binlog names their objects).
var archivePrefixes = []string{"binlogs/", "binlog-gaps/"}

// ErrExists means the target repository holds another backup under a copied one's id,
// or another object under one of its keys: a copy never overwrites.
var ErrExists = errors.New("already in the target repository")

// CopyOptions configures CopyTo.
type CopyOptions struct {
	All       bool  // every complete backup, oldest first (the id is then ignored)
	MaxMemory int64 // bytes of objects held at once (default DefaultMaxMemory)
	Parallel  int   // most objects copied at once (default DefaultUploads)
	Version   string
	Log       *slog.Logger
	// Progress, if set, receives the progress: a bar when Terminal, else a log line
	// every few seconds.
	Progress io.Writer
	Terminal bool
}

// CopyStats counts what a copy did: backups written to the target and those it
// already had complete; objects (and their bytes) copied and those the target already
// held whole, whether in a complete backup, an interrupted copy or the binlog archive.
type CopyStats struct {
	Backups, BackupsThere int
	Objects, ObjectsThere int
	Bytes, BytesThere     int64
	Archive               int // objects of the binlog archive, copied or already there
}

// copyItem is one backup to copy: its manifest as stored, and decoded.
type copyItem struct {
	raw []byte
	m   *manifest.Manifest
}

// copier copies objects from one repository to another, each read whole into one of
// its buffers, checked, then written: as many at once as buffers (the memory budget
// divided by the largest object).
type copier struct {
	from, to *Repo
	o        CopyOptions
	bufs     chan *[]byte
	copied   atomic.Int64 // objects written by this run (for the fault point)
	prog     *progress.Reporter
	// locker is the target's Object Lock, if its bucket has it enabled; lock the
	// retention the backup being copied is locked with until (nil: none), which its
	// copy keeps there.
	locker storage.Locker
	lock   *manifest.Lock
	mu     sync.Mutex
	st     CopyStats
}

// CopyTo copies backup id (or "latest") with the backups it applies on, or every
// complete backup (o.All), and the binlog archive, from r to dst, object by object, as
// stored: nothing is decoded, so no key is needed and a signed backup stays signed.
// Each object is checked against the manifest (size, CRC-32C and, signed, SHA-256)
// before it is written; a backup's manifest is written last, after an in-progress
// marker, and only once every object is there. Objects dst already holds whole (same
// key and size: objects are written whole and checked on arrival) are not copied
// again, nor backups dst already has complete, so a copy cut short is run again to
// finish it. A backup dst holds with another manifest is refused.
func (r *Repo) CopyTo(ctx context.Context, dst *Repo, id string, o CopyOptions) (CopyStats, error) {
	o.MaxMemory = cmp.Or(o.MaxMemory, DefaultMaxMemory)
	o.Parallel = cmp.Or(o.Parallel, DefaultUploads)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if r.Location() == dst.Location() {
		return CopyStats{}, fmt.Errorf("the source and the target are the same repository (%s): name another target", r.Location())
	}
	items, err := r.copySet(ctx, id, o.All)
	if err != nil {
		return CopyStats{}, err
	}
	archive, err := listArchive(ctx, r.st)
	if err != nil {
		return CopyStats{}, err
	}
	c := &copier{from: r, to: dst, o: o}
	if err := c.sizeBuffers(items, archive); err != nil {
		return CopyStats{}, err
	}
	if err := dst.Create(ctx); err != nil {
		return CopyStats{}, err
	}
	if c.locker, err = dst.purger(ctx); err != nil {
		return CopyStats{}, err
	}
	if o.Progress != nil {
		c.prog = progress.New(progress.Options{Label: "copy", Total: total(items, archive), Terminal: o.Terminal, Out: o.Progress, Log: o.Log})
		defer c.prog.Finish()
	}
	for _, it := range items {
		if err := c.backup(ctx, it); err != nil {
			return c.stats(), fmt.Errorf("copy backup %s to %s: %w", it.m.ID, dst.Location(), err)
		}
	}
	c.lock = nil // the binlog archive is not locked
	if err := c.archive(ctx, archive); err != nil {
		return c.stats(), fmt.Errorf("copy the binlog archive to %s: %w", dst.Location(), err)
	}
	return c.stats(), nil
}

// copySet reads the manifests of the backups to copy, bases before the backups on
// them: id's chain, or every complete backup oldest first.
func (r *Repo) copySet(ctx context.Context, id string, all bool) ([]copyItem, error) {
	var ids []string
	if all {
		list, err := r.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			if e.Status == StatusComplete {
				ids = append(ids, e.ID)
			}
		}
	} else {
		chain, err := r.links(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, m := range chain {
			ids = append(ids, m.ID)
		}
	}
	items := make([]copyItem, 0, len(ids))
	for _, id := range ids {
		raw, m, err := r.rawManifest(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := Validate(m); err != nil {
			return nil, err
		}
		items = append(items, copyItem{raw: raw, m: m})
	}
	return items, nil
}

// total is the bytes a copy of items and archive goes through, copied or found there.
func total(items []copyItem, archive []storage.ObjectInfo) int64 {
	var n int64
	for _, it := range items {
		n += it.m.StoredSize()
	}
	for _, oi := range archive {
		n += oi.Size
	}
	return n
}

// listArchive lists the objects of the binlog archive.
func listArchive(ctx context.Context, st storage.Storage) ([]storage.ObjectInfo, error) {
	var out []storage.ObjectInfo
	for _, p := range archivePrefixes {
		err := st.List(ctx, p, func(oi storage.ObjectInfo) error {
			out = append(out, oi)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list the binlog archive of %s: %w", st.Location(), err)
		}
	}
	return out, nil
}

// sizeBuffers makes as many buffers as the budget holds of the largest object (at
// most Parallel), and refuses a budget smaller than that object.
func (c *copier) sizeBuffers(items []copyItem, archive []storage.ObjectInfo) error {
	var largest int64
	var what string
	for _, it := range items {
		for _, o := range it.m.Objects {
			if o.Size > largest {
				largest, what = o.Size, "object "+o.Key+" of backup "+it.m.ID
			}
		}
	}
	for _, oi := range archive {
		if oi.Size > largest {
			largest, what = oi.Size, oi.Key
		}
	}
	if largest > c.o.MaxMemory {
		return setting.Errorf("%s %d MiB is less than the largest object to copy (%s, %d MiB): allow at least %d MiB", setting.MaxMemory,
			c.o.MaxMemory>>20, what, largest>>20, (largest+(1<<20)-1)>>20)
	}
	n := c.o.Parallel
	if largest > 0 {
		n = int(min(int64(n), c.o.MaxMemory/largest))
	}
	// Each buffer is made once, as large as the largest object: grown on demand, every
	// slightly larger object left its old buffer to the garbage collector, and the heap
	// grew to twice the budget.
	c.bufs = make(chan *[]byte, n)
	for range n {
		b := make([]byte, 0, largest)
		c.bufs <- &b
	}
	return nil
}

func (c *copier) stats() CopyStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// count adds an object copied (or found there) to the stats.
func (c *copier) count(size int64, there, archive bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if there {
		c.st.ObjectsThere++
		c.st.BytesThere += size
	} else {
		c.st.Objects++
		c.st.Bytes += size
	}
	if archive {
		c.st.Archive++
	}
	if c.prog != nil {
		c.prog.Add(size)
	}
}

// backup copies one backup: nothing if the target has it complete; else its marker,
// the objects the target lacks, then its manifest.
func (c *copier) backup(ctx context.Context, it copyItem) error {
	m := it.m
	done, err := c.complete(ctx, it)
	if err != nil || done {
		return err
	}
	have, err := c.unfinished(ctx, m.ID)
	if err != nil {
		return err
	}
	if err := c.mismatch(m, have); err != nil {
		return err
	}
	host, _ := os.Hostname()
	mk := Marker{ID: m.ID, Host: host, PID: os.Getpid(), Started: time.Now().UTC(), ToolVersion: c.o.Version}
	if m.Incremental != nil {
		mk.Base = m.Incremental.BaseID
	}
	if err := putJSON(ctx, c.to.st, backupPrefix(m.ID)+markerName, mk); err != nil {
		return err
	}
	c.lock = nil
	if m.Lock.LockedAt(time.Now()) {
		if c.locker == nil {
			c.o.Log.Warn("the backup is locked in the source until its date, its copy is not: the target has no Object Lock", "id", m.ID, "until", m.Lock.RetainUntil)
		} else {
			c.lock = m.Lock
		}
	}
	if err := c.objects(ctx, m, have); err != nil {
		return err
	}
	key := backupPrefix(m.ID) + manifestName
	if err := c.put(ctx, key, it.raw, checksum.Sum(it.raw)); err != nil {
		return fmt.Errorf("write the manifest: %w", err)
	}
	if err := c.to.st.Delete(ctx, backupPrefix(m.ID)+markerName); err != nil {
		c.o.Log.Warn("backup copied, but its in-progress marker could not be removed", "id", m.ID, "err", err)
	}
	c.mu.Lock()
	c.st.Backups++
	c.mu.Unlock()
	c.o.Log.Info("backup copied", "id", m.ID, "objects", len(m.Objects), "stored_bytes", m.StoredSize())
	return nil
}

// complete tells whether the target has the backup complete, with the same manifest
// (or refuses it, with another).
func (c *copier) complete(ctx context.Context, it copyItem) (bool, error) {
	raw, err := getRaw(ctx, c.to.st, backupPrefix(it.m.ID)+manifestName)
	if errors.Is(err, storage.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !bytes.Equal(raw, it.raw) {
		return false, fmt.Errorf("%w: %s holds a backup %s with another manifest; it is left as it is", ErrExists, c.to.Location(), it.m.ID)
	}
	for _, o := range it.m.Objects {
		c.count(o.Size, true, false)
	}
	c.mu.Lock()
	c.st.BackupsThere++
	c.mu.Unlock()
	c.o.Log.Info("backup already complete in the target", "id", it.m.ID)
	return true, nil
}

// unfinished lists what the target holds of a backup without manifest (an interrupted
// copy), refusing one another ferry may still be writing.
func (c *copier) unfinished(ctx context.Context, id string) (map[string]int64, error) {
	e, err := c.to.entry(ctx, id)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	if mk := e.Marker; e.Status == StatusRunning && (mk.Host != host || mk.PID != os.Getpid()) { // (a killed run may have had this pid)
		return nil, fmt.Errorf("%w: ferry (pid %d on %s, started %s) is writing backup %s to %s; run again once it is done (one from another host that wrote nothing for %v is taken for dead)",
			ErrExists, mk.PID, mk.Host, mk.Started.Format(time.RFC3339), id, c.to.Location(), StaleAfter)
	}
	have := map[string]int64{}
	err = c.to.st.List(ctx, backupPrefix(id)+objectsDir, func(oi storage.ObjectInfo) error {
		have[oi.Key] = oi.Size
		return nil
	})
	return have, err
}

// objects copies the backup's objects the target does not hold, several at once.
func (c *copier) objects(ctx context.Context, m *manifest.Manifest, have map[string]int64) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, o := range m.Objects {
		key := ObjectKey(m.ID, o.Key)
		if _, ok := have[key]; ok {
			c.count(o.Size, true, false)
			continue
		}
		if !c.start(gctx, g, func(buf *[]byte) error { return c.object(gctx, key, o, buf) }) {
			break
		}
	}
	return g.Wait()
}

// mismatch refuses objects the target holds under a backup's keys with other sizes:
// not what an interrupted copy of the same backup leaves (objects are written whole).
func (c *copier) mismatch(m *manifest.Manifest, have map[string]int64) error {
	for _, o := range m.Objects {
		key := ObjectKey(m.ID, o.Key)
		if size, ok := have[key]; ok && size != o.Size {
			return fmt.Errorf("%w: %s holds %s with %d bytes, the manifest says %d: it is left as it is (ferry expire on it removes an interrupted copy)", ErrExists, c.to.Location(), key, size, o.Size)
		}
	}
	return nil
}

// start runs fn in g with a buffer once one is free; false if ctx ended first.
func (c *copier) start(ctx context.Context, g *errgroup.Group, fn func(buf *[]byte) error) bool {
	select {
	case buf := <-c.bufs:
		g.Go(func() error {
			defer func() { c.bufs <- buf }()
			return fn(buf)
		})
		return true
	case <-ctx.Done():
		return false
	}
}

// object copies one object of a backup, checked against the manifest before it is
// written. A damaged read is tried once more: the bytes may have changed on their way.
func (c *copier) object(ctx context.Context, key string, o manifest.Object, buf *[]byte) error {
	var err error
	var crc uint32
	for try := 0; try < 2; try++ {
		if err = c.read(ctx, key, o.Size, buf); err == nil {
			crc, err = check(*buf, o)
		}
		if !errors.Is(err, ErrDamaged) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("object %s in %s: %w", key, c.from.Location(), err)
	}
	return c.write(ctx, key, *buf, crc, false)
}

// write stores an object read whole into the target and counts it.
func (c *copier) write(ctx context.Context, key string, b []byte, crc uint32, archive bool) error {
	if err := c.put(ctx, key, b, crc); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	c.count(int64(len(b)), false, archive)
	faultpoint.At(ctx, "copy-object", int(c.copied.Add(1)))
	return nil
}

// put stores b under key in the target, with the backup's lock if it keeps one there.
func (c *copier) put(ctx context.Context, key string, b []byte, crc uint32) error {
	if c.lock != nil {
		return c.locker.PutRetained(ctx, key, bytes.NewReader(b), int64(len(b)), crc, retention(c.lock))
	}
	return c.to.st.Put(ctx, key, bytes.NewReader(b), int64(len(b)), crc)
}

// read reads object key, of size bytes (as the manifest or the listing says), into
// buf; a shorter or longer object is damaged.
func (c *copier) read(ctx context.Context, key string, size int64, buf *[]byte) error {
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	*buf = (*buf)[:size]
	return c.from.st.Get(ctx, key, 0, -1, func(r io.Reader) error {
		n, err := io.ReadFull(r, *buf)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %d bytes, shorter than the %d expected (truncated)", ErrDamaged, n, size)
		}
		if err != nil {
			return err
		}
		if m, _ := io.Copy(io.Discard, io.LimitReader(r, 1)); m > 0 {
			return fmt.Errorf("%w: longer than the %d bytes expected", ErrDamaged, size)
		}
		return nil
	})
}

// check compares an object's bytes with the manifest, CRC-32C and (signed) SHA-256,
// and returns their CRC-32C.
func check(b []byte, o manifest.Object) (uint32, error) {
	crc := checksum.Sum(b)
	if checksum.Hex(crc) != o.CRC32C {
		return 0, fmt.Errorf("%w: %d bytes with CRC-32C %s, the manifest says %s", ErrDamaged, len(b), checksum.Hex(crc), o.CRC32C)
	}
	if o.SHA256 != "" {
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != o.SHA256 {
			return 0, fmt.Errorf("%w: its SHA-256 is not the one the signed manifest records: it was replaced", ErrDamaged)
		}
	}
	return crc, nil
}

// archive copies the binlog archive's objects the target does not hold. They have no
// manifest: each is read at its listed size and written with the CRC-32C of what was
// read (a segment's name carries the CRC-32C of its decoded bytes, which verify on the
// target checks). One that went while the copy ran (merged, or expired) is skipped.
func (c *copier) archive(ctx context.Context, objs []storage.ObjectInfo) error {
	have := map[string]int64{}
	there, err := listArchive(ctx, c.to.st)
	if err != nil {
		return err
	}
	for _, oi := range there {
		have[oi.Key] = oi.Size
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, oi := range objs {
		if size, ok := have[oi.Key]; ok {
			if size != oi.Size {
				return fmt.Errorf("%w: %s holds %s with %d bytes, the source %d: it is left as it is", ErrExists, c.to.Location(), oi.Key, size, oi.Size)
			}
			c.count(oi.Size, true, true)
			continue
		}
		if !c.start(gctx, g, func(buf *[]byte) error { return c.archiveObject(gctx, oi, buf) }) {
			break
		}
	}
	return g.Wait()
}

// archiveObject copies one object of the binlog archive.
func (c *copier) archiveObject(ctx context.Context, oi storage.ObjectInfo, buf *[]byte) error {
	err := c.read(ctx, oi.Key, oi.Size, buf)
	if errors.Is(err, storage.ErrNotExist) {
		c.o.Log.Debug("binlog archive object went while the copy ran", "key", oi.Key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("object %s in %s: %w", oi.Key, c.from.Location(), err)
	}
	return c.write(ctx, oi.Key, *buf, checksum.Sum(*buf), true)
}
