package clone

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/defaults"
)

// errFinished ends a session whose clone was committed.
var errFinished = errors.New("clone finished")

// newClone starts a clone for a recipient: welcome, wait for its go-ahead, then run the
// backup into the session while this and the recipient's other connections carry it.
func (d *donor) newClone(ctx context.Context, bc *bufConn, h hello, peer string) {
	d.mu.Lock()
	old := d.cur
	d.mu.Unlock()
	if old != nil && old.err() == nil {
		if old.liveConns() > 0 {
			refuse(bc, "the donor is busy with another clone: wait for it to finish")
			return
		}
		d.cfg.Log.Warn("a new clone replaces one whose recipient went away", "old", old.id)
		d.stopCurrent(errors.New("replaced by a new clone from a recipient"))
	}
	mode, err := ParseCompress(h.Compress)
	if err != nil {
		refuse(bc, err.Error())
		return
	}
	picker, err := newCodecPicker(mode, d.cfg.Memory)
	if err != nil {
		refuse(bc, err.Error())
		return
	}
	id := newSessionID()
	s := newSession(ctx, id, sessionOptions{log: d.cfg.Log.With("clone", id), memory: d.cfg.Memory,
		maxRate: minPositive(d.cfg.MaxRate, h.MaxRate), codec: picker, grace: d.cfg.Grace})
	d.mu.Lock()
	d.cur = s
	d.mu.Unlock()
	go func() {
		err := d.runClone(bc, s, h, peer)
		s.fail(err)
		close(s.finished)
		if d.cfg.Once {
			select {
			case d.done <- err:
			default:
			}
		}
	}()
}

// runClone is the life of one clone on the donor; nil when the recipient has it all.
func (d *donor) runClone(bc *bufConn, s *session, h hello, peer string) (err error) {
	est := d.est
	if est == 0 {
		est = d.estimate()
	}
	if err := d.welcome(bc, s.id, est, d.currentLSN(s.ctx)); err != nil {
		bc.c.Close()
		return fmt.Errorf("welcome %s: %w", peer, err)
	}
	var st start
	bc.c.SetReadDeadline(time.Now().Add(10 * time.Minute))
	unblock := context.AfterFunc(s.ctx, func() { bc.c.SetReadDeadline(time.Now()) }) // a stopped donor does not wait
	f, err := readFrame(bc.r)
	unblock()
	if err == nil {
		err = decodeJSON(f, &st)
	}
	bc.c.SetReadDeadline(time.Time{})
	if err == nil && st.Abort != "" {
		err = fmt.Errorf("the recipient did not start: %s", st.Abort)
	}
	if err != nil {
		bc.c.Close()
		s.log.Warn("clone not started", "peer", peer, "err", err)
		return err
	}
	s.log.Info("clone starting", "peer", peer, "compress", s.codec.mode, "max_rate", s.rateLimit(), "max_impact", minPositiveF(d.cfg.MaxImpact, h.MaxImpact))
	go s.serveConn(bc, nil)
	go s.watch()
	end := d.cfg.Stats.begin()
	defer func() { end(err, s.sentBytes.Load()) }()
	cfg := d.cfg.Backup
	// one reader per core, not the backup's 1 (defaults.DonorParallel)
	cfg.Parallel = cmp.Or(cfg.Parallel, defaults.DonorParallel())
	cfg.Replica.Info, cfg.Replica.BestEffort = true, true // a recipient may replicate from this replica's source
	s.monitor = &backup.Monitor{}
	cfg.Sink, cfg.Monitor = s, s.monitor
	if st.Resume != nil {
		if cfg.Incremental, err = d.resumeBase(st.Resume); err != nil {
			return err
		}
		s.log.Info("resuming an interrupted clone: the pages changed since its start, and the files it lacks whole",
			"from_lsn", st.Resume.StartLSN, "files_kept", len(st.Resume.Files))
	}
	cfg.MaxImpact, cfg.WatchRedo = minPositiveF(d.cfg.MaxImpact, h.MaxImpact), true
	start := time.Now()
	res, err := backup.Run(s.ctx, cfg)
	if err != nil {
		if cause := s.err(); cause != nil && !errors.Is(cause, errFinished) {
			err = cause // the session's failure (the recipient's error, a lost link) says more
		}
		s.log.Error("clone failed", "err", err)
		return err
	}
	raw, zs, lz, ratio := s.codec.summary()
	s.log.Info("clone sent", "seconds", time.Since(start).Round(time.Millisecond).Seconds(), "bytes_on_wire", s.sentBytes.Load(),
		"gtid", res.Manifest.Coordinates.ReplicaGTID(), "frames_raw", raw, "frames_zstd", zs, "frames_lz4", lz, "ratio", fmt.Sprintf("%.2f", ratio),
		"recopy_rounds", res.Rounds, "pages_recopied", res.PagesRecopied, "redo_kept", res.Manifest.LastLSN-res.Manifest.StartLSN)
	s.fail(errFinished)
	return nil
}

// join adds a connection to the running clone it names; registered, if set, is
// called once the session counts it (or the connection is refused).
func (d *donor) join(bc *bufConn, h hello, peer string, registered func()) {
	if registered == nil {
		registered = func() {}
	}
	d.mu.Lock()
	s := d.cur
	d.mu.Unlock()
	if s == nil || s.id != h.Session || s.err() != nil {
		registered()
		refuse(bc, "that clone is over on the donor (it failed, finished or gave up waiting): run ferry clone again")
		return
	}
	if err := d.welcome(bc, s.id, 0, 0); err != nil {
		registered()
		bc.c.Close()
		return
	}
	s.log.Debug("stream joined", "peer", peer)
	s.serveConn(bc, registered)
}

// liveConns counts the session's connections.
func (s *session) liveConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

func (s *session) rateLimit() int64 {
	if s.rate == nil {
		return 0
	}
	return int64(s.rate.Limit())
}

// watch ends the session when the recipient stays away longer than the grace period.
func (s *session) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		lost := s.conns == 0 && time.Since(s.lostSince) > s.grace
		s.mu.Unlock()
		if lost {
			s.fail(fmt.Errorf("%w for %v", errLost, s.grace))
			return
		}
	}
}

// serveConn sends frames on one connection and reads its acknowledgements, until the
// session ends or the connection breaks (its unacknowledged frames then go out again
// on the other connections). registered, if set, is called once the connection counts.
func (s *session) serveConn(bc *bufConn, registered func()) {
	c := &conn{s: s, bc: bc, sent: map[uint64]*frame{}}
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	if registered != nil {
		registered()
	}
	go c.readAcks()
	err := c.sendLoop()
	c.down(err)
}

// conn is one connection of a session on the donor.
type conn struct {
	s    *session
	bc   *bufConn
	once sync.Once
	dead atomic.Bool
	// wmu serializes writes to bc.w: the send loop's frames and down's error frame,
	// which the acknowledgements' reader may send while a frame is half written.
	wmu sync.Mutex

	mu   sync.Mutex
	sent map[uint64]*frame
}

func (c *conn) sendLoop() error {
	s := c.s
	for {
		f, ok := s.tryNext()
		if !ok {
			if err := c.locked(c.bc.w.Flush); err != nil {
				return err
			}
			var err error
			if f, err = s.nextFor(&c.dead); err != nil {
				return err
			}
			if f == nil {
				return nil
			}
		}
		// A frame taken after the connection went down (its acknowledgements' reader
		// failed first) is handed back: down has already requeued what it held.
		c.mu.Lock()
		if c.dead.Load() {
			c.mu.Unlock()
			s.requeue([]*frame{f})
			return nil
		}
		c.sent[f.seq] = f
		c.mu.Unlock()
		if s.rate != nil {
			if err := s.rate.WaitN(s.ctx, min(f.wireSize(), s.rate.Burst())); err != nil {
				return err
			}
		}
		if err := c.locked(func() error { return writeFrame(c.bc.w, f) }); err != nil {
			return err
		}
		s.sentBytes.Add(int64(f.wireSize()))
	}
}

// locked runs write with the connection's writer to itself.
func (c *conn) locked(write func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return write()
}

func (c *conn) readAcks() {
	for {
		f, err := readFrame(c.bc.r)
		if err != nil {
			c.down(err)
			return
		}
		switch f.typ {
		case frameAck:
			c.mu.Lock()
			delete(c.sent, f.seq)
			c.mu.Unlock()
			c.s.acked(f.seq)
		case frameError:
			c.s.fail(remoteError("the recipient failed: " + string(f.payload)))
			c.down(nil)
			return
		default:
			c.down(fmt.Errorf("%w: unexpected frame type %d from the recipient", errProtocol, f.typ))
			return
		}
	}
}

// down closes the connection once: a session error is told to the recipient, and the
// frames it did not acknowledge are sent again on the other connections.
func (c *conn) down(err error) {
	c.once.Do(func() {
		s := c.s
		c.dead.Store(true) // before c.mu: sendLoop checks it under c.mu before keeping a frame
		if cause := s.err(); cause != nil && !errors.Is(cause, errFinished) {
			c.bc.c.SetWriteDeadline(time.Now().Add(5 * time.Second)) // a write blocked in the send loop fails by then
			c.locked(func() error { return c.bc.send(&frame{typ: frameError, payload: []byte(cause.Error())}) })
		}
		c.bc.c.Close()
		c.mu.Lock()
		var again []*frame
		for _, f := range c.sent {
			again = append(again, f)
		}
		c.mu.Unlock()
		s.requeue(again)
		s.mu.Lock()
		if s.conns--; s.conns == 0 {
			s.lostSince = time.Now()
		}
		s.wake.Broadcast()
		s.mu.Unlock()
		if err != nil && s.err() == nil && !s.committed.Load() {
			s.log.Warn("a stream to the recipient broke; its frames go out again on the others", "err", err, "resent", len(again))
		}
	})
}

func minPositive(a, b int64) int64 {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func minPositiveF(a, b float64) float64 {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
