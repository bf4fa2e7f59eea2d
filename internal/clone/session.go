package clone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// maxFrameData is the raw bytes of one data frame.
const maxFrameData = 1 << 20

// session is one clone on the donor: the backup writes into it (it is the backup's
// Sink) and every connection of the recipient sends its frames. A frame stays in
// memory until the recipient acknowledges it; the frames of a connection that breaks
// go out again on the others, so a dropped stream loses nothing.
type session struct {
	id    string
	log   *slog.Logger
	ctx   context.Context
	fail  context.CancelCauseFunc
	mem   *semaphore.Weighted // raw bytes of unacknowledged frames
	rate  *rate.Limiter       // --max-rate on the wire, nil: unlimited
	codec *codecPicker
	grace time.Duration
	// monitor is the backup's: it tells where its redo copy began, which the close
	// frames of tablespaces carry (closeInfo).
	monitor *backup.Monitor

	mu         sync.Mutex
	wake       *sync.Cond
	pending    []*frame          // to send, oldest first
	inflight   map[uint64]*frame // sent or pending, not yet acknowledged
	idle       chan struct{}     // closed and replaced whenever an ack lands
	conns      int               // live connections
	lostSince  time.Time         // when the last connection broke (conns == 0)
	nextSeq    uint64
	nextHandle uint64

	patchMu    sync.Mutex // held while a round's first patch waits for the frames before it
	patchRound int        // the re-copy round whose patches are being sent (patchMu)
	sentBytes  atomic.Int64
	committed  atomic.Bool   // the recipient acknowledged the commit
	finished   chan struct{} // closed when the clone's backup has stopped
}

var _ sink.Sink = (*session)(nil)

func newSession(ctx context.Context, id string, o sessionOptions) *session {
	s := &session{id: id, log: o.log, mem: semaphore.NewWeighted(o.memory), codec: o.codec, grace: o.grace,
		inflight: map[uint64]*frame{}, idle: make(chan struct{}), finished: make(chan struct{}), lostSince: time.Now()}
	if o.maxRate > 0 {
		s.rate = rate.NewLimiter(rate.Limit(o.maxRate), maxFrameData+headerSize+maxPath)
	}
	s.wake = sync.NewCond(&s.mu)
	s.ctx, s.fail = context.WithCancelCause(ctx)
	context.AfterFunc(s.ctx, func() { s.mu.Lock(); s.wake.Broadcast(); s.mu.Unlock() })
	return s
}

// sessionOptions are a session's limits.
type sessionOptions struct {
	log     *slog.Logger
	memory  int64
	maxRate int64
	codec   *codecPicker
	grace   time.Duration
}

// err is why the session ended, nil while it runs.
func (s *session) err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// enqueue numbers f and queues it for sending.
func (s *session) enqueue(f *frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err(); err != nil {
		return err
	}
	s.nextSeq++
	f.seq = s.nextSeq
	s.inflight[f.seq] = f
	s.pending = append(s.pending, f)
	s.wake.Signal()
	return nil
}

// tryNext takes the next pending frame without waiting.
func (s *session) tryNext() (*frame, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 || s.err() != nil {
		return nil, false
	}
	f := s.pending[0]
	s.pending = s.pending[1:]
	return f, true
}

// nextFor blocks until a frame is pending (returned), the session ends (its error,
// nil once finished) or stop is set (nil, nil).
func (s *session) nextFor(stop *atomic.Bool) (*frame, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) == 0 || s.err() != nil {
		if err := s.err(); err != nil {
			if errors.Is(err, errFinished) {
				return nil, nil
			}
			return nil, err
		}
		if stop.Load() {
			return nil, nil
		}
		s.wake.Wait()
	}
	f := s.pending[0]
	s.pending = s.pending[1:]
	return f, nil
}

// requeue puts frames a broken connection did not get acknowledged back at the front.
func (s *session) requeue(fs []*frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var again []*frame
	for _, f := range fs {
		if _, ok := s.inflight[f.seq]; ok {
			again = append(again, f)
		}
	}
	s.pending = append(again, s.pending...)
	s.wake.Broadcast()
}

// acked records the recipient's acknowledgement of seq.
func (s *session) acked(seq uint64) {
	s.mu.Lock()
	f, ok := s.inflight[seq]
	if ok {
		delete(s.inflight, seq)
		close(s.idle)
		s.idle = make(chan struct{})
	}
	s.mu.Unlock()
	if ok {
		if f.cost > 0 {
			s.mem.Release(f.cost)
		}
		if f.done != nil {
			close(f.done)
		}
	}
}

// waitAcked blocks until done reports nothing outstanding.
func (s *session) waitAcked(done func() bool) error {
	for {
		s.mu.Lock()
		ok, ch := done(), s.idle
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-s.ctx.Done():
			return context.Cause(s.ctx)
		}
	}
}

// call sends a control frame once every earlier frame is acknowledged, and waits for
// its own acknowledgement: the recipient applies it after all the data before it.
// Frames queued meanwhile (the redo copy goes on) do not hold it up.
func (s *session) call(f *frame) error {
	s.mu.Lock()
	upto := s.nextSeq
	s.mu.Unlock()
	if err := s.waitAcked(func() bool { return s.oldestInflight() > upto }); err != nil {
		return err
	}
	f.done = make(chan struct{})
	if err := s.enqueue(f); err != nil {
		return err
	}
	select {
	case <-f.done:
		return nil
	case <-s.ctx.Done():
		return context.Cause(s.ctx)
	}
}

// oldestInflight is the lowest seq not yet acknowledged, MaxUint64 if none (s.mu held).
func (s *session) oldestInflight() uint64 {
	oldest := uint64(math.MaxUint64)
	for seq := range s.inflight {
		oldest = min(oldest, seq)
	}
	return oldest
}

// Name implements sink.Sink.
func (s *session) Name() string { return "clone recipient" }

// Caps implements sink.Sink: like a directory, the recipient's staging copy takes
// writes at any offset, removes and renames until the manifest, and pages copied
// again (each checked on its own; the file's checksum stays that of the first copy);
// nothing goes to the server's disks. It is recorded as a directory, which it becomes.
func (s *session) Caps() sink.Caps {
	return sink.Caps{Rewrite: true, Patch: true, PatchApart: true, Remote: true, Storage: manifest.Storage{Format: manifest.StorageDir}}
}

// Open implements sink.Sink: the session is open.
func (s *session) Open(context.Context, string) error { return s.err() }

// Abort implements sink.Sink: the recipient discards what it received.
func (s *session) Abort(error) string {
	return "the recipient never received a manifest, so it discards the partial clone"
}

// Create implements sink.Sink.
func (s *session) Create(rel string, o sink.FileOptions) (sink.File, error) {
	s.mu.Lock()
	s.nextHandle++
	h := s.nextHandle
	s.mu.Unlock()
	var flags byte
	if o.Sparse {
		flags = flagSparse
	}
	return &sinkFile{s: s, rel: rel, handle: h, flags: flags, space: o.Space}, s.err()
}

// Patch implements sink.Sink: the bytes go as data frames marked as a patch, which the
// recipient writes over the complete file. Frames may arrive in any order over several
// connections, so the first patch of a round waits until every frame before it is
// acknowledged: a round's patches then land after the file and after the round before
// (the patches of one round do not overlap). It returns 0 (Caps().PatchApart).
func (s *session) Patch(round int, rel string, off int64, p []byte) (uint32, error) {
	if err := s.patchBarrier(round); err != nil {
		return 0, err
	}
	for len(p) > 0 {
		n := min(len(p), maxFrameData)
		if err := s.sendData(rel, 0, flagPatch, p[:n], off); err != nil {
			return 0, err
		}
		p, off = p[n:], off+int64(n)
	}
	return 0, nil
}

// Remove implements sink.Sink.
func (s *session) Remove(rel string) error {
	return s.call(&frame{typ: frameRemove, path: rel})
}

// Rename implements sink.Sink.
func (s *session) Rename(from, to string) error {
	return s.call(&frame{typ: frameRename, path: from, payload: []byte(to)})
}

// Commit implements sink.Sink: once every file is acknowledged, the manifest goes in
// the commit frame, and the recipient writes it last.
func (s *session) Commit(_ context.Context, m *manifest.Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if err := s.call(&frame{typ: frameCommit, payload: b}); err != nil {
		return fmt.Errorf("send the end of the clone: %w", err)
	}
	s.committed.Store(true) // the recipient has everything: it may close its streams now
	return nil
}

// sinkFile is one file of the backup on its way to the recipient.
type sinkFile struct {
	s      *session
	rel    string
	handle uint64
	flags  byte
	space  *manifest.Space // the tablespace it copies, nil for another file
	frames atomic.Uint32   // data frames sent (segments write one file from several goroutines)
}

// WriteAt sends p as data frames; it returns once they are queued (p is not kept).
func (f *sinkFile) WriteAt(p []byte, off int64) error {
	for len(p) > 0 {
		n := min(len(p), maxFrameData)
		if err := f.send(p[:n], off); err != nil {
			return err
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

func (f *sinkFile) send(p []byte, off int64) error {
	if err := f.s.sendData(f.rel, f.handle, f.flags, p, off); err != nil {
		return err
	}
	f.frames.Add(1)
	return nil
}

// sendData queues one data frame of p (at most maxFrameData) for file rel.
func (s *session) sendData(rel string, handle uint64, flags byte, p []byte, off int64) error {
	cost := int64(len(p))
	if err := s.mem.Acquire(s.ctx, cost); err != nil {
		return context.Cause(s.ctx)
	}
	fr := &frame{typ: frameData, flags: flags, handle: handle, off: off, rawLen: uint32(len(p)),
		crc: checksum.Sum(p), path: rel, cost: cost}
	var err error
	fr.codec, fr.payload, err = s.codec.encode(p, s.queued())
	if err != nil {
		s.mem.Release(cost)
		return err
	}
	if err := s.enqueue(fr); err != nil {
		s.mem.Release(cost)
		return err
	}
	return nil
}

// Close sends the file's end without waiting: it carries the number of data frames,
// and the recipient closes the file once all of them have arrived, whatever
// connections they took.
func (f *sinkFile) Close(size int64) error {
	fr := &frame{typ: frameClose, flags: f.flags, handle: f.handle, off: size, rawLen: f.frames.Load(), path: f.rel}
	if start := f.s.monitor.StartLSN(); f.space != nil && start != 0 {
		b, err := json.Marshal(closeInfo{StartLSN: start, Space: f.space})
		if err != nil {
			return err
		}
		fr.payload = b
	}
	return f.s.enqueue(fr)
}

// patchBarrier makes the first patch of a round wait until every frame queued before
// it is acknowledged; the round's other patches wait for that too.
func (s *session) patchBarrier(round int) error {
	s.patchMu.Lock()
	defer s.patchMu.Unlock()
	if round == s.patchRound {
		return nil
	}
	if err := s.Drain(s.ctx); err != nil {
		return err
	}
	s.patchRound = round
	return nil
}

// Drain implements sink.Sink: it waits until every frame queued so far is acknowledged.
func (s *session) Drain(context.Context) error {
	s.mu.Lock()
	upto := s.nextSeq
	s.mu.Unlock()
	return s.waitAcked(func() bool { return s.oldestInflight() > upto })
}

// queued is the share of the memory budget waiting to be sent (not yet on a
// connection): high when the network is the bottleneck.
func (s *session) queued() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, f := range s.pending {
		n += f.cost
	}
	return float64(n) / float64(s.codec.budget)
}

// errLost is the cause when the recipient's connections stay broken.
var errLost = errors.New("lost every connection to the recipient")
