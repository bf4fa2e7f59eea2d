package clone

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/safepath"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/stream"
)

// receiver writes what the donor sends into the staging directory.
type receiver struct {
	dir   string
	dec   *decoder
	log   *slog.Logger
	prog  func(int64)
	ctx   context.Context
	fail  context.CancelCauseFunc
	conns connector // the donor's further connections, and reconnections
	grace time.Duration
	// journal records what a resumed clone could keep (nil: nothing is recorded)
	journal *journal
	// feed, if set, is told how the first copy of the redo log (logName) lands, for
	// a parse that follows it; a second copy, a removal or a rename fails it.
	feed    *apply.Feed
	fedFile *rfile

	mu         sync.Mutex
	files      map[uint64]*rfile // by handle
	byPath     map[string]*rfile // the file each path holds now
	committed  chan struct{}     // closed once the commit is applied and acknowledged
	commitOnce sync.Once
	commitWait time.Duration // how long a stream broken after the commit waits for its acknowledgement
	manifest   *manifest.Manifest
	broken     error     // why the last stream broke, while it is down (nil once it is back)
	brokenAt   time.Time // when
}

// noteBroken records why a stream broke (nil: it is back).
func (r *receiver) noteBroken(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.broken, r.brokenAt = err, time.Now()
}

// failure is why the clone ended, with the broken stream it was waiting for, if any:
// a clone stopped from outside (a Galera joiner whose server gave up) says the donor
// had gone quiet.
func (r *receiver) failure() error {
	cause := context.Cause(r.ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken == nil {
		return cause
	}
	return fmt.Errorf("%w; the donor's connections had broken %v before (%v)", cause, time.Since(r.brokenAt).Round(100*time.Millisecond), r.broken)
}

// logName is the redo log of the copy.
const logName = "ib_logfile0"

// rfile is one file of the clone on the recipient.
type rfile struct {
	feed   *apply.Feed // told of the file's writes (the redo log followed)
	mu     sync.Mutex
	path   string
	full   string // path in the staging directory
	sparse bool
	t      *filecopy.Target
	spans  map[uint64]span // data frames applied, by seq
	end    *frame          // the close frame, kept until every data frame is in
	closed bool
	size   int64
	crc    uint32
	// patched: patch frames applied, by seq (a resent copy is not applied again: a
	// later round may have written over the same pages since).
	patched map[uint64]bool
}

// span is where one data frame went.
type span struct {
	off int64
	n   int64
	crc uint32
}

// run keeps a connection applying frames, redialling (for up to the grace period) when
// it breaks, until the clone is committed or fails.
func (r *receiver) run(bc *bufConn, session string) {
	for {
		err := r.apply(bc)
		bc.c.Close()
		if r.ctx.Err() != nil || r.isCommitted() {
			return
		}
		if r.commitApplied() {
			r.awaitCommitted()
			return
		}
		var rem remoteError
		if errors.As(err, &rem) {
			r.fail(fmt.Errorf("the donor: %s", string(rem)))
			return
		}
		r.log.Warn("a stream from the donor broke; reconnecting", "err", err)
		r.noteBroken(err)
		if bc, err = r.redial(session); err != nil {
			r.fail(err)
			return
		}
		r.noteBroken(nil)
	}
}

// redial connects again to the running clone, with backoff, for up to the grace
// period; the donor's refusal or a permanent error ends it at once.
func (r *receiver) redial(session string) (*bufConn, error) {
	ctx, cancel := context.WithTimeoutCause(r.ctx, r.grace, fmt.Errorf("no reconnection within %v", r.grace))
	defer cancel()
	var bc *bufConn
	err := backoff.Retry(ctx, dialPolicy(), func(ctx context.Context) (err error) {
		bc, _, err = r.conns.connect(ctx, session)
		return err
	}, retryable, func(a backoff.Attempt) {
		r.log.Warn("reconnecting to the donor failed; retrying", "attempt", a.N, "in", a.Wait.Round(time.Millisecond), "err", a.Err)
	})
	if err == nil {
		return bc, nil
	}
	if r.ctx.Err() != nil {
		return nil, context.Cause(r.ctx)
	}
	return nil, fmt.Errorf("lost the connection to the donor and could not reconnect: %w", err)
}

// commitApplied tells whether the commit frame was applied; its acknowledgement may
// still be on its way.
func (r *receiver) commitApplied() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manifest != nil
}

// awaitCommitted is what a stream that breaks after the commit was applied does: the
// donor closes every connection as soon as it has the commit's acknowledgement, which
// may reach it before the stream that carried the commit marks the clone committed.
// That is the end, not a failure: it waits for the mark, and sets it itself if the
// commit's own stream broke before its acknowledgement (the clone is whole all the same).
func (r *receiver) awaitCommitted() {
	select {
	case <-r.committed:
	case <-r.ctx.Done():
	case <-time.After(r.commitWait):
		r.commitOnce.Do(func() { close(r.committed) })
	}
}

func (r *receiver) isCommitted() bool {
	select {
	case <-r.committed:
		return true
	default:
		return false
	}
}

// apply reads frames from one connection, applies them and acknowledges each.
func (r *receiver) apply(bc *bufConn) error {
	context.AfterFunc(r.ctx, func() { bc.c.SetDeadline(time.Now()) })
	for {
		f, err := readFrame(bc.r)
		if err != nil {
			return err
		}
		if f.typ == frameError {
			return remoteError(f.payload)
		}
		if err := r.applyFrame(f); err != nil {
			r.fail(err)
			bc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			bc.send(&frame{typ: frameError, payload: []byte(err.Error())})
			return err
		}
		if err := writeFrame(bc.w, &frame{typ: frameAck, seq: f.seq}); err != nil {
			return err
		}
		if bc.r.Buffered() == 0 || f.typ == frameCommit {
			if err := bc.w.Flush(); err != nil {
				return err
			}
		}
		if f.typ == frameCommit {
			r.commitOnce.Do(func() { close(r.committed) }) // after the donor has its ack
		}
	}
}

func (r *receiver) applyFrame(f *frame) error {
	switch f.typ {
	case frameData:
		return r.data(f)
	case frameClose:
		return r.closeFile(f)
	case frameRemove:
		return r.remove(f.path)
	case frameRename:
		return r.rename(f.path, string(f.payload))
	case frameCommit:
		return r.commit(f.payload)
	}
	return fmt.Errorf("%w: unexpected frame type %d from the donor", errProtocol, f.typ)
}

// file returns the file of a handle, registering it under its path.
func (r *receiver) file(f *frame) (*rfile, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rf, ok := r.files[f.handle]
	if !ok {
		full, err := safepath.MkdirParents(r.dir, f.path, 0o750)
		if err != nil {
			return nil, peerPathErr(err)
		}
		if err := r.journal.removed(f.path); err != nil { // copied again: not whole until closed
			return nil, err
		}
		rf = &rfile{path: f.path, full: full, sparse: f.flags&flagSparse != 0, spans: map[uint64]span{}}
		r.follow(rf)
		r.files[f.handle] = rf
		r.byPath[f.path] = rf
	}
	return rf, nil
}

// follow gives the feed the first copy of the redo log (r.mu held); a later copy
// replaces it, and the parse following the first one ends.
func (r *receiver) follow(rf *rfile) {
	switch {
	case r.feed == nil || rf.path != logName:
	case r.fedFile == nil:
		rf.feed, r.fedFile = r.feed, rf
	default:
		r.feed.Fail(apply.ErrFeedReplaced)
	}
}

// unfollow ends the feed if rel is the log it follows (removed or renamed).
func (r *receiver) unfollow(rel string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.feed != nil && (rel == logName || r.fedFile != nil && r.byPath[rel] == r.fedFile) {
		r.feed.Fail(apply.ErrFeedReplaced)
	}
}

// data writes one data frame (again, harmlessly, if it was resent).
func (r *receiver) data(f *frame) error {
	if f.flags&flagPatch != 0 {
		return r.patch(f)
	}
	rf, err := r.file(f)
	if err != nil {
		return err
	}
	rf.mu.Lock()
	_, dup := rf.spans[f.seq]
	if rf.closed || dup {
		rf.mu.Unlock()
		return nil
	}
	if rf.t == nil {
		if rf.t, err = filecopy.Create(rf.full, rf.sparse); err != nil {
			rf.mu.Unlock()
			return err
		}
	}
	t := rf.t
	rf.mu.Unlock()
	raw, err := r.dec.decode(f, make([]byte, f.rawLen))
	if err != nil {
		return fmt.Errorf("%s at offset %d: %w", f.path, f.off, err)
	}
	crc := checksum.Sum(raw)
	if crc != f.crc || len(raw) != int(f.rawLen) {
		return fmt.Errorf("%s at offset %d: received %d bytes with CRC-32C %s, the donor sent %d with %s: the data was damaged in transit", f.path, f.off, len(raw), checksum.Hex(crc), f.rawLen, checksum.Hex(f.crc))
	}
	if err := t.WriteAt(raw, f.off); err != nil {
		rf.mu.Lock()
		_, dup = rf.spans[f.seq]
		late := rf.closed || dup // a resent copy of this frame finished the file meanwhile
		rf.mu.Unlock()
		if late {
			return nil
		}
		return err
	}
	r.prog(int64(len(raw)))
	if rf.feed != nil {
		rf.feed.Wrote(f.off, int64(len(raw)))
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	rf.spans[f.seq] = span{off: f.off, n: int64(len(raw)), crc: crc}
	return rf.finish(r.journal)
}

// patch writes a frame of pages copied again over a complete file, once. The file's
// checksum stays that of its first copy (the frame's own was checked), extended with
// zeros if the patch makes the file longer, as the donor's manifest has it.
func (r *receiver) patch(f *frame) error {
	r.mu.Lock()
	rf, ok := r.byPath[f.path]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: pages copied again for %s, which was not sent", errProtocol, f.path)
	}
	rf.mu.Lock()
	done, closed, full := rf.patched[f.seq], rf.closed, rf.full
	rf.mu.Unlock()
	switch {
	case done:
		return nil
	case !closed:
		return fmt.Errorf("%w: pages copied again for %s before it was complete", errProtocol, f.path)
	}
	raw, err := r.dec.decode(f, make([]byte, f.rawLen))
	if err != nil {
		return fmt.Errorf("%s at offset %d: %w", f.path, f.off, err)
	}
	if crc := checksum.Sum(raw); crc != f.crc || len(raw) != int(f.rawLen) {
		return fmt.Errorf("%s at offset %d: received %d bytes of pages copied again with CRC-32C %s, the donor sent %d with %s: the data was damaged in transit", f.path, f.off, len(raw), checksum.Hex(crc), f.rawLen, checksum.Hex(f.crc))
	}
	t, err := filecopy.Open(full, false, false) // every byte written: zeros must replace old bytes too
	if err != nil {
		return err
	}
	err = t.WriteAt(raw, f.off)
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write pages copied again into %s: %w", f.path, filecopy.WrapWriteErr(err))
	}
	r.prog(int64(len(raw)))
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if end := f.off + int64(len(raw)); end > rf.size {
		rf.crc, rf.size = checksum.Extend(rf.crc, end-rf.size), end
	}
	if rf.patched == nil {
		rf.patched = map[uint64]bool{}
	}
	rf.patched[f.seq] = true
	return nil
}

// closeFile records the file's end; it is applied once all its data frames are in.
func (r *receiver) closeFile(f *frame) error {
	rf, err := r.file(f)
	if err != nil {
		return err
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.closed {
		return nil
	}
	rf.end = f
	return rf.finish(r.journal)
}

// finish closes the file if its close frame and all its data are in (rf.mu held),
// works out its CRC-32C and journals a tablespace received whole.
func (rf *rfile) finish(j *journal) error {
	if rf.end == nil || len(rf.spans) < int(rf.end.rawLen) {
		return nil
	}
	size := rf.end.off
	if rf.t == nil {
		t, err := filecopy.Create(rf.full, rf.sparse)
		if err != nil {
			return err
		}
		rf.t = t
	}
	err := rf.t.Truncate(size)
	if cerr := rf.t.Close(); err == nil && cerr != nil {
		err = filecopy.WrapWriteErr(cerr)
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", rf.path, err)
	}
	rf.t, rf.closed, rf.size = nil, true, size
	if rf.feed != nil {
		rf.feed.Complete(size)
	}
	crc, ok := rf.tiledCRC()
	if !ok {
		n, c, err := filecopy.FileCRC(rf.full)
		if err != nil {
			return err
		}
		if n != size {
			return fmt.Errorf("%s is %d bytes after closing at %d (internal error)", rf.path, n, size)
		}
		crc = c
	}
	rf.crc, rf.spans = crc, nil
	var info closeInfo
	if len(rf.end.payload) == 0 || json.Unmarshal(rf.end.payload, &info) != nil {
		return nil // an older donor's close, or not a tablespace: nothing to resume from
	}
	return j.done(rf.path, size, info)
}

// tiledCRC combines the frames' CRCs when they cover the file exactly once, in order;
// otherwise (a range written twice) the file is read back.
func (rf *rfile) tiledCRC() (uint32, bool) {
	spans := make([]span, 0, len(rf.spans))
	for _, s := range rf.spans {
		spans = append(spans, s)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].off < spans[j].off })
	var crc uint32
	var at int64
	for _, s := range spans {
		if s.off != at {
			return 0, false
		}
		crc = checksum.Combine(crc, s.crc, s.n)
		at += s.n
	}
	return crc, at == rf.size
}

// peerPathErr tells a name from the donor that leaves the datadir (a protocol error)
// from a failure to create its directory here.
func peerPathErr(err error) error {
	if errors.Is(err, safepath.ErrUnsafe) {
		return fmt.Errorf("%w: the donor named a file outside the datadir: %w", errProtocol, err)
	}
	return filecopy.WrapWriteErr(err)
}

// remove forgets a stale copy.
func (r *receiver) remove(rel string) error {
	p, err := safepath.Join(r.dir, rel)
	if err != nil {
		return fmt.Errorf("%w: remove outside the datadir: %w", errProtocol, err)
	}
	r.unfollow(rel)
	r.mu.Lock()
	delete(r.byPath, rel)
	r.mu.Unlock()
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale copy %s: %w", rel, err)
	}
	return r.journal.removed(rel)
}

// rename moves a finished copy (DDL during the clone); done twice it is a no-op.
func (r *receiver) rename(from, to string) error {
	src, err := safepath.Join(r.dir, from)
	if err != nil {
		return fmt.Errorf("%w: rename outside the datadir: %w", errProtocol, err)
	}
	dst, err := safepath.MkdirParents(r.dir, to, 0o750)
	if err != nil {
		return peerPathErr(err)
	}
	r.unfollow(from)
	r.unfollow(to)
	r.mu.Lock()
	defer r.mu.Unlock()
	rf, ok := r.byPath[from]
	if !ok {
		if _, err := os.Stat(dst); err == nil {
			return nil
		}
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("rename copy %s to %s: %w", from, to, err)
	}
	if err := r.journal.renamed(from, to); err != nil {
		return err
	}
	delete(r.byPath, from)
	if ok {
		rf.mu.Lock()
		rf.path, rf.full = to, dst
		rf.mu.Unlock()
		r.byPath[to] = rf
	}
	return nil
}

// commit checks every file is complete, keeps the manifest and ends the clone.
func (r *receiver) commit(payload []byte) error {
	m, err := manifest.Parse(payload, "the donor's manifest")
	if err != nil {
		return fmt.Errorf("%w: %w", errProtocol, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rf := range r.byPath {
		rf.mu.Lock()
		open := rf.end != nil && !rf.closed
		rf.mu.Unlock()
		if open {
			return fmt.Errorf("%s lacks data frames at the end of the clone (internal error)", rf.path)
		}
	}
	r.manifest = m
	return r.journal.flush() // every file is whole: a clone killed from here on keeps them all
}

// unpacked is what the clone wrote, in the form restore verifies against the manifest.
func (r *receiver) unpacked() *stream.Unpacked {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := &stream.Unpacked{Files: map[string]stream.FileSum{}}
	for p, rf := range r.byPath {
		if rf.closed {
			u.Files[p] = stream.FileSum{Size: rf.size, CRC: rf.crc, Stored: p}
		}
	}
	return u
}

// dialer connects to a donor and authenticates it.
type dialer struct {
	addr string
	tls  *tls.Config
	key  []byte
	h    hello
}

// dial opens one authenticated connection; session "" asks for a new clone.
func (d *dialer) dial(ctx context.Context, session string) (*bufConn, welcome, error) {
	var w welcome
	nd := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
	c, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, w, fmt.Errorf("connect to the donor %s: %w (is ferry serve running there, and the port open?)", d.addr, err)
	}
	tc := tls.Client(c, d.tls)
	tc.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, w, explainTLS(err, d.addr)
	}
	bc := newBufConn(tc)
	h := d.h
	h.Session = session
	w, err = exchange(bc, h, d.key)
	if errors.Is(err, errImpostor) {
		c.Close()
		return nil, w, backoff.Permanent(fmt.Errorf("%s did not prove it knows the token: it is not the donor you meant (wrong address, or something in between)", d.addr))
	}
	if err != nil {
		c.Close()
		return nil, w, d.explain(err)
	}
	tc.SetDeadline(time.Time{})
	bc.grow()
	return bc, w, nil
}

// explain makes a failed hello say what to do.
func (d *dialer) explain(err error) error {
	var rem remoteError
	if errors.As(err, &rem) {
		return rem
	}
	if errors.Is(err, errProtocol) {
		return backoff.Permanent(fmt.Errorf("%s does not speak ferry's clone protocol: %w", d.addr, err))
	}
	return setting.Errorf("the donor %s closed the connection during the handshake (%v): check %s and the certificates", d.addr, err, setting.TokenFile)
}

// writeManifest stores the manifest the commit carried, last.
func writeManifest(dir string, m *manifest.Manifest) error {
	if err := filecopy.SyncFS(dir); err != nil {
		return err
	}
	return manifest.Write(dir, m)
}
