package backup

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/diskspace"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/spool"
)

// tailer is one redo copy running in the background: the redo tailer reads the
// server's log at local disk speed into a spool. The copy the backup keeps is drained from its spool into the
// backup's ib_logfile0 as fast as the end takes it, so a slow end never holds the
// tailer back (it would be lapped by the server).
type tailer struct {
	t     RedoCopy
	spool *spool.Spool
	pages *redo.PageSet // pages the copied redo touched; nil when not tracked

	mu   sync.Mutex
	ops  []redo.FileOp // file-level records seen, in LSN order (FILE_MODIFY aside)
	mods []redo.FileOp // the FILE_MODIFY records seen, in LSN order

	// head, if set, is written to the backup's ib_logfile0 before the spool: the start
	// of the log when the roll-forward took the spool's first bytes (rollforward.go).
	head     io.Reader
	headFile *os.File // closed once drained

	// Set once the copy is kept: drained into the backup's ib_logfile0.
	f   sink.File
	w   *bufio.Writer
	sum *sumWriter

	ran, drained     chan struct{} // closed when Run, Drain return
	runErr, drainErr error
	draining         bool
	released         bool
	finished         bool
	// dropped: this copy's redo will not be the backup's (a tracker replaced by a
	// re-copy round, or lapped): its failures and its drain's no longer fail the job.
	dropped atomic.Bool
}

// spoolMemory is the spool's memory tier; beyond it the redo waits in a file.
const spoolMemory = 32 << 20

// sumWriter counts and checksums what it passes on.
type sumWriter struct {
	w   *bufio.Writer
	n   int64
	crc uint32
}

func (s *sumWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	s.crc = checksum.Update(s.crc, p[:n])
	if err != nil {
		return n, filecopy.WrapWriteErr(err)
	}
	return n, nil
}

// tailKind says what a redo copy is for.
type tailKind int

const (
	tailKept    tailKind = iota // spooled, and drained into the backup at once
	tailRound                   // spooled and tracking pages; kept only if it is the last round
	tailTracker                 // kept and tracking pages, until a re-copy round replaces it
	// tailHeld tracks pages like a tracker but only spools: its redo is drained into
	// the backup only if no re-copy round runs, so a remote end's link never carries
	// redo that a round drops.
	tailHeld
)

// openTail opens the server's redo log at its newest checkpoint and starts a redo copy
// of the given kind. A failure of a copy whose redo may be kept cancels the whole job
// through fail; a tracker that fails (lapped by the server) only ends, and the
// three-stage copy falls back to reading page LSNs.
func (j *job) openTail(ctx context.Context, fail context.CancelCauseFunc, kind tailKind) (*tailer, error) {
	tl := &tailer{ran: make(chan struct{}), drained: make(chan struct{})}
	tl.spool = spool.New(spool.Options{Dir: j.cfg.Spool.Dir, Memory: spoolMemory, Max: j.spoolLimit})
	var out io.Writer = tl.spool
	if kind != tailKept {
		tl.pages = redo.NewPageSet(0)
	}
	tracker := kind == tailTracker || kind == tailHeld
	if tracker && j.cfg.TrackerStall > 0 {
		out = &stallWriter{w: out, d: j.cfg.TrackerStall}
	}
	t, err := j.openRedo(redo.Config{
		Path:      j.redoPath(),
		Out:       out,
		Server:    j.srv,
		Creator:   "Backup ferry " + j.cfg.Version,
		OnFileOp:  tl.addOp,
		Pages:     tl.pages,
		Keys:      j.logKeys,
		Algorithm: j.info.Vars["file_key_management_encryption_algorithm"],
	})
	if err != nil {
		return nil, err
	}
	tl.t = t
	j.tails = append(j.tails, tl)
	j.cfg.Monitor.set(t.Copied, func() (uint64, error) {
		_, cur, err := j.srv.LSNs(ctx)
		return cur, err
	}, j.redoCapacity(), t.Start().LSN)
	go func() {
		defer close(tl.ran)
		if tl.runErr = t.Run(ctx); tl.runErr != nil {
			if tracker {
				tl.dropped.Store(true) // the re-copy round falls back to page LSNs
			} else {
				fail(tl.runErr)
			}
			tl.spool.Abort(tl.runErr)
		}
	}()
	if kind == tailKept || kind == tailTracker {
		return tl, j.keep(tl, fail)
	}
	return tl, nil
}

// keep makes tl the redo copy of the backup: its spool drains into ib_logfile0.
func (j *job) keep(tl *tailer, fail context.CancelCauseFunc) error {
	f, err := j.create(j.redoLog().Stored(), sink.FileOptions{})
	if err != nil {
		return fmt.Errorf("create backup redo log: %w", err)
	}
	tl.f = f
	tl.w = bufio.NewWriterSize(&appender{f: f}, 1<<20)
	tl.sum = &sumWriter{w: tl.w}
	tl.draining = true
	j.tail = tl
	go func() {
		defer close(tl.drained)
		if tl.head != nil {
			if _, err := io.Copy(tl.sum, tl.head); err != nil {
				tl.spool.Abort(err)
			}
		}
		if tl.drainErr = tl.spool.Drain(tl.sum, 1<<20); tl.drainErr != nil && !tl.dropped.Load() {
			fail(fmt.Errorf("write backup redo log: %w", tl.drainErr))
		}
	}()
	return nil
}

// addOp records a file-level record (FILE_MODIFY says nothing about DDL).
func (tl *tailer) addOp(op redo.FileOp) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if op.Kind == redo.FileModify {
		tl.mods = append(tl.mods, op)
		return
	}
	tl.ops = append(tl.ops, op)
}

// namesBelow is what the file-level records below lsn say of the tablespaces modified
// since the copy's checkpoint: each one's file name at lsn (renames followed, deleted
// ones left out), as a checkpoint at lsn would name them in its FILE_MODIFY records.
func (tl *tailer) namesBelow(lsn uint64) []redo.FileName {
	tl.mu.Lock()
	all := append(append([]redo.FileOp(nil), tl.ops...), tl.mods...)
	tl.mu.Unlock()
	sort.SliceStable(all, func(a, b int) bool { return all[a].LSN < all[b].LSN })
	names := map[uint32]string{}
	for _, op := range all {
		if op.LSN >= lsn {
			break
		}
		switch op.Kind {
		case redo.FileDelete:
			delete(names, op.SpaceID)
		case redo.FileRename:
			if _, ok := names[op.SpaceID]; ok {
				names[op.SpaceID] = op.NewName
			}
		default:
			names[op.SpaceID] = op.Name
		}
	}
	out := make([]redo.FileName, 0, len(names))
	for id, n := range names {
		out = append(out, redo.FileName{SpaceID: id, Name: n})
	}
	return out
}

// opsBelow returns the file-level records seen below lsn.
func (tl *tailer) opsBelow(lsn uint64) []redo.FileOp {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []redo.FileOp
	for _, op := range tl.ops {
		if op.LSN < lsn {
			out = append(out, op)
		}
	}
	return out
}

// fileOps returns every file-level record since the backup's first checkpoint: those
// of retired copies below where the next one started, then the kept copy's.
func (j *job) fileOps() []redo.FileOp {
	ops := append([]redo.FileOp(nil), j.retiredOps...)
	return append(ops, j.tail.opsBelow(math.MaxUint64)...)
}

// retire stops a redo copy at lsn (where the next one starts), waits for it and frees
// it, keeping its file-level records below lsn. It returns the copy's error.
func (j *job) retire(tl *tailer, lsn uint64) error {
	tl.dropped.Store(true)
	tl.t.StopAt(lsn)
	<-tl.ran
	j.retiredOps = append(j.retiredOps, tl.opsBelow(lsn)...)
	j.release(tl)
	if tl.draining { // the tracker wrote the backup's ib_logfile0 so far: a round replaces it
		j.tail = nil
		if err := j.sink.Remove(j.redoLog().Stored()); err != nil {
			return err
		}
		j.mu.Lock()
		j.sent.Forget(j.redoLog().Stored())
		j.mu.Unlock()
	}
	return tl.runErr
}

// spoolMax is --max-spool, or by default nine tenths of the space free in the spool's
// directory at the start.
func (j *job) spoolMax() (int64, error) {
	if j.cfg.Spool.Max > 0 {
		return j.cfg.Spool.Max, nil
	}
	dir := cmp.Or(j.cfg.Spool.Dir, os.TempDir())
	free, err := diskspace.Free(dir)
	if err != nil {
		return 0, setting.Errorf("redo spool directory %s (%s): %w", dir, setting.Tmpdir, err)
	}
	return free / 10 * 9, nil
}

// releaseTail stops whatever of the redo copies still runs (after a failure) and frees
// their spools; the job's context is already cancelled, so Run returns.
func (j *job) releaseTail() {
	for _, tl := range j.tails {
		j.release(tl)
	}
}

// release stops one redo copy and frees its spool, once.
func (j *job) release(tl *tailer) {
	if tl.released {
		return
	}
	tl.released = true
	tl.t.StopAt(0)
	tl.spool.Abort(context.Canceled)
	<-tl.ran
	if tl.draining {
		<-tl.drained
		if !tl.finished {
			tl.f.Close(tl.sum.n)
		}
	}
	if tl.headFile != nil {
		tl.headFile.Close()
	}
	tl.spool.Release()
}

// loadLogKeys reads, for a server that encrypts its redo log, the keys the redo copy
// needs to read the file-level records that tell DDL during the copy: from --key-file
// if given, else from the server's own file_key_management files as this host sees
// them. It runs before anything is written.
func (j *job) loadLogKeys() error {
	if !j.info.EncryptsLog() {
		return nil
	}
	files, k, err := j.cfg.Keys, (*keyfile.Keys)(nil), error(nil)
	if files.KeyFile != "" {
		k, err = files.Load()
	} else {
		var pw string
		if pw, err = keyfile.Secret(j.info.Vars["file_key_management_filekey"]); err == nil {
			k, err = keyfile.Load(j.info.Vars["file_key_management_filename"], pw)
		}
	}
	if err != nil {
		return setting.Errorf("the server encrypts its redo log (innodb_encrypt_log=ON), whose records ferry reads to follow DDL during the copy, and its key file cannot be read: %w; run ferry as a user that can read it, or pass %s (and %s)", err, setting.KeyFile, setting.KeyPasswordFile)
	}
	err = redo.CheckLogKey(j.redoPath(), k.Key, j.info.Vars["file_key_management_encryption_algorithm"])
	if errors.Is(err, redo.ErrWrongKey) {
		return setting.Errorf("the key file does not decrypt the server's encrypted redo log (key id 1 of %s): pass %s with the server's own key file (and %s)", mariadb.FileKeyManagement, setting.KeyFile, setting.KeyPasswordFile)
	}
	if err != nil {
		return fmt.Errorf("check the key of the server's encrypted redo log: %w", err)
	}
	j.logKeys = k.Key
	return nil
}

// finishTail waits for the copy to reach the stop readEnd set under BLOCK_COMMIT (an
// mtr boundary at or after the end LSN), drains the spool into the backup and records
// the file. On failure releaseTail cleans up.
func (j *job) finishTail(ctx context.Context) (uint64, error) {
	j.prog.Stage("backup: storing the redo tail")
	tl := j.tail
	<-tl.ran
	if tl.runErr != nil {
		return 0, tl.runErr
	}
	tl.spool.Close()
	if tl.spool.Held() > 0 {
		j.log.Info("redo copy: draining the spool into the backup", "bytes", tl.spool.Held())
	}
	select {
	case <-tl.drained:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	if tl.drainErr != nil {
		return 0, fmt.Errorf("write backup redo log: %w", tl.drainErr)
	}
	tl.finished = true
	if err := tl.w.Flush(); err != nil {
		tl.f.Close(tl.sum.n)
		return 0, fmt.Errorf("write backup redo log: %w", filecopy.WrapWriteErr(err))
	}
	if err := tl.f.Close(tl.sum.n); err != nil {
		return 0, fmt.Errorf("write backup redo log: %w", filecopy.WrapWriteErr(err))
	}
	j.record(copiedFile{Rel: j.redoLog().Stored(), Size: tl.sum.n, CRC: tl.sum.crc, Kind: "redo"})
	j.log.Info("redo copy finished", "redo_bytes", tl.sum.n, "spool_peak_bytes", tl.spool.Peak(),
		"spool_dir", cmp.Or(j.cfg.Spool.Dir, os.TempDir()))
	return tl.t.EndLSN(), nil
}

// stallWriter is TrackerStall's test hook: its first write waits d.
type stallWriter struct {
	w       io.Writer
	d       time.Duration
	stalled bool
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if !s.stalled {
		s.stalled = true
		time.Sleep(s.d)
	}
	return s.w.Write(p)
}

// appender writes a sink.File sequentially.
type appender struct {
	f   sink.File
	off int64
}

func (a *appender) Write(p []byte) (int, error) {
	if err := a.f.WriteAt(p, a.off); err != nil {
		return 0, err
	}
	a.off += int64(len(p))
	return len(p), nil
}

// redoCapacity is the part of the server's circular redo log that holds records.
func (j *job) redoCapacity() uint64 { return j.redoLog().Capacity() }

// redoHeaderBytes is the header before the circular part of ib_logfile0.
const redoHeaderBytes = 12288
