package backup

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/spool"
	"golang.org/x/sys/unix"
)

// tailer runs the redo copy in the background: the redo tailer reads the server's log
// at local disk speed into a spool, and a drainer writes the spool into the backup's
// ib_logfile0 as fast as the end takes it, so a slow end never holds the tailer back
// (it would be lapped by the server).
type tailer struct {
	t     redoCopy
	f     sink.File
	w     *bufio.Writer
	sum   *sumWriter
	spool *spool.Spool

	ran, drained       chan struct{} // closed when Run, Drain return
	runErr, drainErr   error
	released, finished bool
}

// redoCopy is what the engine asks of the redo tailer (*redo.Tailer). Unit tests fake it.
type redoCopy interface {
	Run(ctx context.Context) error
	StopAt(lsn uint64)
	Copied() uint64
	WaitCopied(ctx context.Context, lsn uint64) error
	Start() redo.Checkpoint
	EndLSN() uint64
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

// startTail opens the server's redo log at its current checkpoint and starts copying;
// a tailer failure (e.g. lapped by the server) cancels the whole job through fail.
func (j *job) startTail(ctx context.Context, fail context.CancelCauseFunc) error {
	f, err := j.create("ib_logfile0", sink.FileOptions{})
	if err != nil {
		return fmt.Errorf("create backup redo log: %w", err)
	}
	w := bufio.NewWriterSize(&appender{f: f}, 1<<20)
	sum := &sumWriter{w: w}
	sp := spool.New(spool.Options{Dir: j.cfg.Spool.Dir, Memory: spoolMemory, Max: j.spoolLimit})
	t, err := redo.Open(redo.Config{
		Path:      j.redoPath(),
		Out:       sp,
		Server:    mariadb.LSNSource{DB: j.db},
		Creator:   "Backup ferry " + j.cfg.Version,
		OnFileOp:  j.addOp,
		Keys:      j.logKeys,
		Algorithm: j.info.Vars["file_key_management_encryption_algorithm"],
	})
	if err != nil {
		f.Close(0)
		return err
	}
	j.tail = &tailer{t: t, f: f, w: w, sum: sum, spool: sp, ran: make(chan struct{}), drained: make(chan struct{})}
	j.cfg.Monitor.set(t.Copied, func() (uint64, error) {
		_, cur, err := mariadb.LSNSource{DB: j.db}.LSNs(ctx)
		return cur, err
	}, j.redoCapacity())
	go func() {
		defer close(j.tail.ran)
		if j.tail.runErr = t.Run(ctx); j.tail.runErr != nil {
			fail(j.tail.runErr)
			sp.Abort(j.tail.runErr)
		}
	}()
	go func() {
		defer close(j.tail.drained)
		if j.tail.drainErr = sp.Drain(sum, 1<<20); j.tail.drainErr != nil {
			fail(fmt.Errorf("write backup redo log: %w", j.tail.drainErr))
		}
	}()
	return nil
}

// spoolMax is --max-spool, or by default nine tenths of the space free in the spool's
// directory at the start.
func (j *job) spoolMax() (int64, error) {
	if j.cfg.Spool.Max > 0 {
		return j.cfg.Spool.Max, nil
	}
	dir := cmp.Or(j.cfg.Spool.Dir, os.TempDir())
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("redo spool directory %s (--tmpdir): %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize / 10 * 9, nil
}

// releaseTail stops whatever of the redo copy still runs (after a failure) and frees
// the spool; the job's context is already cancelled, so Run returns.
func (j *job) releaseTail() {
	if j.tail == nil || j.tail.released {
		return
	}
	j.tail.released = true
	j.tail.spool.Abort(context.Canceled)
	<-j.tail.ran
	<-j.tail.drained
	if !j.tail.finished {
		j.tail.f.Close(j.tail.sum.n)
	}
	j.tail.spool.Release()
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
		return fmt.Errorf("the server encrypts its redo log (innodb_encrypt_log=ON), whose records ferry reads to follow DDL during the copy, and its key file cannot be read: %w; run ferry as a user that can read it, or pass --key-file (and --key-password-file)", err)
	}
	err = redo.CheckLogKey(j.redoPath(), k.Key, j.info.Vars["file_key_management_encryption_algorithm"])
	if errors.Is(err, redo.ErrWrongKey) {
		return fmt.Errorf("the key file does not decrypt the server's encrypted redo log (key id 1 of %s): pass --key-file with the server's own key file (and --key-password-file)", mariadb.FileKeyManagement)
	}
	if err != nil {
		return fmt.Errorf("check the key of the server's encrypted redo log: %w", err)
	}
	j.logKeys = k.Key
	return nil
}

func (j *job) addOp(op redo.FileOp) {
	if op.Kind == redo.FileModify {
		return
	}
	j.mu.Lock()
	j.ops = append(j.ops, op)
	j.mu.Unlock()
}

// finishTail waits for the copy to reach the stop readEnd set under BLOCK_COMMIT (an
// mtr boundary at or after the end LSN), drains the spool into the backup and records
// the file. On failure releaseTail cleans up.
func (j *job) finishTail(ctx context.Context) (uint64, error) {
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
	j.record(copiedFile{Rel: "ib_logfile0", Size: tl.sum.n, CRC: tl.sum.crc, Kind: "redo"})
	j.log.Info("redo copy finished", "redo_bytes", tl.sum.n, "spool_peak_bytes", tl.spool.Peak(),
		"spool_dir", cmp.Or(j.cfg.Spool.Dir, os.TempDir()))
	return tl.t.EndLSN(), nil
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
func (j *job) redoCapacity() uint64 {
	var size uint64
	fmt.Sscan(j.info.Vars["innodb_log_file_size"], &size)
	if size <= redoHeaderBytes {
		return 0
	}
	return size - redoHeaderBytes
}

// redoHeaderBytes is the header before the circular part of ib_logfile0.
const redoHeaderBytes = 12288
