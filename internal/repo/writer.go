package repo

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/storage"
)

// Defaults of WriterOptions.
const (
	DefaultPartSize  = defaults.PartSize       // raw bytes per part
	DefaultMaxMemory = defaults.PipelineMemory // encoded bytes held (parts, packs, uploads) plus block buffers
	DefaultUploads   = defaults.Uploads        // most objects uploading at once
	initialUploads   = 2                       // uploaders at the start; more join while objects wait
)

// WriterOptions configures a backup written into a repository.
type WriterOptions struct {
	// Pipeline is the encoding (compression, encryption, workers, open files); its
	// MaxMemory is ignored: the Writer sizes the block pool from MaxMemory.
	Pipeline  pipeline.Options
	PartSize  int64 // raw bytes per part
	MaxMemory int64 // the whole budget: block buffers, parts, packs, uploads
	Uploads   int   // most uploads at once (the pool grows up to it while objects wait)
	Version   string
	Log       *slog.Logger
	// Base is the id of the backup an incremental applies on: its in-progress marker
	// names it, so that expire keeps the base while the incremental runs.
	Base string
	// SignWith, if set, signs the manifest (docs/security.md): every object's SHA-256
	// is recorded, and the manifest carries the key's signature over all of it.
	SignWith ed25519.PrivateKey
	// LockFor, if set, stores every object of the backup (its manifest too, never its
	// in-progress marker) with an S3 Object Lock retention in LockMode (default
	// governance) until the backup's start plus LockFor (docs/repository.md, Immutable
	// backups). The repository must be a bucket with Object Lock enabled.
	LockFor  time.Duration
	LockMode storage.LockMode
}

func (o WriterOptions) withDefaults() WriterOptions {
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.Uploads <= 0 {
		o.Uploads = DefaultUploads
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Pipeline.Workers = max(o.Pipeline.Workers, 1)
	o.Pipeline.MaxMemory = o.Pipeline.MinMemory()
	return o
}

// partsMemory is what the budget leaves for encoded bytes.
func (o WriterOptions) partsMemory() int64 { return o.MaxMemory - o.Pipeline.MaxMemory }

// Check refuses a budget too small for the part size and the parallel files.
func (o WriterOptions) Check() error {
	o = o.withDefaults()
	if o.PartSize < 1<<20 || o.PartSize > 4<<30 {
		return setting.Errorf("%s %d MiB: use 1 MiB to 4 GiB", setting.PartSize, o.PartSize>>20)
	}
	if o.LockFor < 0 {
		return setting.Errorf("%s: give a positive number of days", setting.LockDays)
	}
	if o.LockMode != "" && o.LockMode != storage.Governance && o.LockMode != storage.Compliance {
		return setting.Errorf("%s %q: give governance or compliance", setting.LockMode, strings.ToLower(string(o.LockMode)))
	}
	if need := o.Pipeline.MaxMemory + 3*o.PartSize; o.MaxMemory < need {
		return setting.Errorf("%s %d MiB is too small for %s %d MiB and %d parallel files: allow at least %d MiB", setting.MaxMemory, o.MaxMemory>>20, setting.PartSize, o.PartSize>>20, o.Pipeline.OpenFiles, (need+(1<<20)-1)>>20)
	}
	return nil
}

// packThreshold: blobs encoded smaller than this are gathered into packs, which close
// once they reach it: so every object but a backup's last pack holds at least a part
// size of stored bytes, however well the parts compress (a 32 MiB part of InnoDB data
// is about 14 MiB once compressed: three go into one object).
func (o WriterOptions) packThreshold() int64 { return o.PartSize }

// Marker is the in-progress object a backup writes first and deletes after its
// manifest: it tells expire whether the backup may still be running.
type Marker struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Started     time.Time `json:"started"`
	ToolVersion string    `json:"tool_version"`
	Base        string    `json:"base,omitempty"` // an incremental's base backup
	// Storage is how the backup encodes its objects (compression, encryption, part
	// size) and Recipients whom it encrypts to: a resumed backup must encode alike, its
	// held objects are kept as they are.
	Storage    *manifest.Storage `json:"storage,omitempty"`
	Recipients []string          `json:"recipients,omitempty"`
	// Resumed counts the attempts that continued the backup after the first.
	Resumed int `json:"resumed,omitempty"`
	// Lock is the Object Lock the backup's objects are stored with (the marker itself
	// is not locked: it is deleted after the manifest).
	Lock *manifest.Lock `json:"lock,omitempty"`
}

// Writer writes one backup into the repository. Files are created, written (several
// ranges of one file at once, each in order), closed, removed or renamed; Commit then
// uploads the manifest last. Until then the backup is incomplete and never restored.
type Writer struct {
	repo  *Repo
	id    string
	o     WriterOptions
	enc   *pipeline.Encoder
	mem   *budget
	pool  chunkPool
	ctx   context.Context
	stop  context.CancelCauseFunc
	queue chan sealed
	ups   *uploads // sealed objects not yet uploaded, for Drain
	upWG  sync.WaitGroup
	puts  sync.RWMutex   // held shared by each upload under way: Abort waits for them to stop
	upN   atomic.Int32   // uploaders running
	enqWG sync.WaitGroup // packs sealed under w.mu, on their way to the queue

	mu       sync.Mutex
	files    map[string]*File
	nextObj  int
	pack     *buffer
	packKey  string
	packRes  int64 // budget bytes the pack holds
	objects  []manifest.Object
	uploaded int // objects this attempt uploaded
	err      error

	since     atomic.Uint64 // the copy's start LSN, recorded in every object's index
	packIndex []indexEntry  // the tablespace ranges in the pack being filled
	// held is what an interrupted attempt stored that a resumed backup may keep (by
	// file); kept counts what it kept.
	held map[string][]heldBlob
	kept Kept

	lock   *manifest.Lock // the retention of every object but the marker; nil: none
	locker storage.Locker // set with lock
}

// sealed is an object ready to upload.
type sealed struct {
	key    string
	buf    *buffer
	ticket uint64 // in w.ups
}

// NewBackup starts backup id: it writes the in-progress marker and starts the
// uploaders. The caller must Commit or Abort.
func (r *Repo) NewBackup(ctx context.Context, id string, o WriterOptions) (*Writer, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	var locker storage.Locker
	if o.LockFor > 0 {
		var err error
		if locker, err = r.CanLock(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.Create(ctx); err != nil {
		return nil, err
	}
	if err := r.checkNew(ctx, id); err != nil {
		return nil, err
	}
	enc, err := pipeline.NewEncoder(o.Pipeline)
	if err != nil {
		return nil, err
	}
	mk := o.marker(id, 0)
	if locker != nil {
		mk.Lock = newLock(mk.Started, o.LockFor, o.LockMode)
	}
	if err := putJSON(ctx, r.st, backupPrefix(id)+markerName, mk); err != nil {
		enc.Close()
		return nil, fmt.Errorf("start backup in %s: %w", r.Location(), err)
	}
	return r.startWriter(ctx, id, o, enc, mk.Lock, locker), nil
}

// marker is the in-progress marker of backup id, on its resumed-th attempt.
func (o WriterOptions) marker(id string, resumed int) Marker {
	host, _ := os.Hostname()
	st := (&Sink{opts: o}).Caps().Storage
	var to []string
	for _, r := range o.Pipeline.Recipients {
		to = append(to, fmt.Sprint(r))
	}
	return Marker{ID: id, Host: host, PID: os.Getpid(), Started: time.Now().UTC(), ToolVersion: o.Version, Base: o.Base,
		Storage: &st, Recipients: to, Resumed: resumed}
}

// startWriter starts the uploaders of backup id, whose marker is written.
func (r *Repo) startWriter(ctx context.Context, id string, o WriterOptions, enc *pipeline.Encoder, lock *manifest.Lock, locker storage.Locker) *Writer {
	w := &Writer{repo: r, id: id, o: o, enc: enc, mem: newBudget(o.partsMemory()), files: map[string]*File{},
		queue: make(chan sealed, 4096), ups: newUploads(), lock: lock, locker: locker}
	w.ctx, w.stop = context.WithCancelCause(ctx)
	context.AfterFunc(w.ctx, func() { w.mem.fail(context.Cause(w.ctx)) })
	for range min(initialUploads, o.Uploads) {
		w.addUploader()
	}
	return w
}

// checkNew refuses an id already used in the repository.
func (r *Repo) checkNew(ctx context.Context, id string) error {
	used := false
	err := r.st.List(ctx, backupPrefix(id), func(storage.ObjectInfo) error {
		used = true
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if used {
		return fmt.Errorf("backup id %s is already used in %s (internal error: ids are random)", id, r.Location())
	}
	return nil
}

var errStop = errors.New("stop")

// ID is the backup's id.
func (w *Writer) ID() string { return w.id }

// MemoryBudget is the memory the writer may hold: block buffers and encoded bytes.
func (w *Writer) MemoryBudget() int64 { return w.o.MaxMemory }

// fail records the first error and stops everything.
func (w *Writer) fail(err error) error {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	err = w.err
	w.mu.Unlock()
	w.stop(err)
	return err
}

// Err returns the first error of the backup.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.enc.Err()
}

// newObject names the next object of the backup.
func (w *Writer) newObject() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.objectName()
}

func (w *Writer) objectName() string {
	name := fmt.Sprintf("%s%08d", objectsDir, w.nextObj)
	w.nextObj++
	return name
}

// enqueue hands a sealed object to the uploaders. Objects waiting in the queue mean
// the link, not the copy, is the bottleneck: another uploader joins (up to Uploads), so
// the concurrency grows until the link is full or the memory budget is the limit.
func (w *Writer) enqueue(key string, buf *buffer, ticket uint64) {
	select {
	case w.queue <- sealed{key, buf, ticket}:
	case <-w.ctx.Done():
		buf.release()
		w.mem.done(buf.n)
		w.ups.done(ticket)
		return
	}
	if len(w.queue) > 0 && int(w.upN.Load()) < w.o.Uploads {
		w.addUploader()
	}
}

// addUploader starts one more uploader (the count may overshoot by a few under races,
// never by more than the concurrent enqueuers).
func (w *Writer) addUploader() {
	w.upN.Add(1)
	w.upWG.Add(1)
	go w.uploader()
}

// Uploaders is how many uploaders the backup ended with.
func (w *Writer) Uploaders() int { return int(w.upN.Load()) }

// uploader puts sealed objects until the queue closes.
func (w *Writer) uploader() {
	defer w.upWG.Done()
	for s := range w.queue {
		size, crc := s.buf.n, s.buf.crc
		var sum string
		if w.o.SignWith != nil {
			h := sha256.New()
			s.buf.appendTo(h)
			sum = hex.EncodeToString(h.Sum(nil))
		}
		var err error
		w.puts.RLock()
		if w.ctx.Err() == nil {
			err = w.put(w.ctx, ObjectKey(w.id, s.key), s.buf, size, crc)
		}
		w.puts.RUnlock()
		s.buf.release()
		w.mem.done(size)
		if err != nil {
			w.fail(fmt.Errorf("upload %s: %w", ObjectKey(w.id, s.key), err))
		} else {
			w.mu.Lock()
			w.objects = append(w.objects, manifest.Object{Key: s.key, Size: size, CRC32C: checksum.Hex(crc), SHA256: sum})
			w.uploaded++
			n := w.uploaded
			w.mu.Unlock()
			faultpoint.At(w.ctx, "repo-object", n)
		}
		w.ups.done(s.ticket)
	}
}

// put stores one of the backup's objects, with its lock if it has one.
func (w *Writer) put(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32) error {
	if w.lock != nil {
		return w.locker.PutRetained(ctx, key, data, size, crc, retention(w.lock))
	}
	return w.repo.st.Put(ctx, key, data, size, crc)
}

// addToPack appends a small sealed blob to the current pack, which is uploaded once it
// reaches the part size. It sets the blob's object and offset.
func (w *Writer) addToPack(b *manifest.Blob, e *indexEntry, buf *buffer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pack == nil {
		w.pack = &buffer{pool: &w.pool}
		w.packKey = w.objectName()
	}
	b.Object, b.Offset = w.packKey, w.pack.n
	if e != nil {
		e.Blob = *b
		w.packIndex = append(w.packIndex, *e)
	}
	buf.appendTo(w.pack)
	w.packRes += buf.n
	if w.pack.n >= w.o.PartSize {
		w.sealPackLocked()
	}
}

// sealPackLocked seals the pack for upload (w.mu held).
func (w *Writer) sealPackLocked() bool {
	if w.pack == nil || w.pack.n == 0 {
		return false
	}
	p, key, res := w.pack, w.packKey, w.packRes
	p.Write(encodeIndex(p.n, p.crc, w.since.Load(), w.packIndex))
	w.pack, w.packRes, w.packIndex = nil, 0, nil
	w.mem.seal(res, p.n)
	w.enqWG.Add(1)
	ticket := w.ups.start()
	go func() { // never wait for the queue under w.mu: the uploaders take it too
		defer w.enqWG.Done()
		w.enqueue(key, p, ticket)
	}()
	return true
}

// flushPack uploads a partial pack to free memory; false if there is none.
func (w *Writer) flushPack() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sealPackLocked()
}
