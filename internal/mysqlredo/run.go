package mysqlredo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// BackupHeader returns the 2048-byte header of a backup log: h (the server's file
// holding the checkpoint) with creator and no flags, both checkpoint blocks at
// checkpoint, a zero encryption header.
func BackupHeader(h Header, checkpoint uint64, creator string) []byte {
	return FileHeader(Header{Format: Format, UUID: h.UUID, StartLSN: h.StartLSN, Creator: creator}, checkpoint)
}

// Run writes the backup log header to Out and then copies the log block by block
// from the block holding A, following the server from file to file. Only whole
// blocks that validate are written, except the final one: once StopAt(E) was
// called and the block holding E is on disk, Run writes it as the server wrote it
// (possibly partial) and returns nil. It returns *OverwrittenError if the server
// consumed or reused a file before it was copied, an error wrapping ErrCorrupt for
// a block still invalid on a second read below the server's flushed LSN,
// ErrEncrypted, ErrRedoDisabled, or the context's error. Run may be called once.
func (t *Tailer) Run(ctx context.Context) (err error) {
	if !t.ran.CompareAndSwap(false, true) {
		return errors.New("mysql redo tailer: Run called twice")
	}
	var end uint64
	defer func() {
		t.file.fh.Close()
		if t.arch != nil && t.arch != t.file {
			t.arch.fh.Close()
		}
		t.prog.finish(end, err)
	}()
	if _, err := t.cfg.Out.Write(BackupHeader(t.head, t.a, t.cfg.Creator)); err != nil {
		return fmt.Errorf("write backup redo log header: %w", err)
	}
	for {
		done, err := t.step(ctx)
		if err != nil {
			return err
		}
		if done {
			end, _ = t.stop.get()
			return t.checkEnd()
		}
	}
}

// step does one round: stop check, poll, copy. It sleeps for Poll when there was
// nothing to copy and reports true once the block holding the stop LSN is copied.
func (t *Tailer) step(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if e, ok := t.stop.get(); ok && t.cur > e/BlockSize*BlockSize {
		return true, nil
	}
	flushed, current, err := t.cfg.Server.LSNs(ctx)
	if err != nil {
		return false, fmt.Errorf("mysql redo tailer: %w", err)
	}
	t.srvAt = current
	if err := t.followArchive(); err != nil {
		return false, err
	}
	progressed, err := t.round(ctx, flushed)
	if err != nil {
		return false, err
	}
	if !progressed {
		return false, t.idle(ctx)
	}
	return false, t.advance(ctx)
}

// advance passes a new Copied() to Config.Advance.
func (t *Tailer) advance(ctx context.Context) error {
	c := t.Copied()
	if t.cfg.Advance == nil || c <= t.advanced {
		return nil
	}
	if err := t.cfg.Advance(ctx, c); err != nil {
		return fmt.Errorf("advance the redo log consumer to LSN %d: %w", c, err)
	}
	t.advanced = c
	return nil
}

// round copies what the server has flushed since the last round: whole blocks
// below the flushed LSN, the next file at a file end, or the final block.
func (t *Tailer) round(ctx context.Context, flushed uint64) (bool, error) {
	e, stopping := t.stop.get()
	final := stopping && t.cur == e/BlockSize*BlockSize
	if t.cur >= t.file.EndLSN {
		switch {
		case t.file == t.arch && final && flushed >= e:
			return false, t.flushArchive(ctx) // the block of E is not archived yet
		case t.file == t.arch && flushed > t.cur:
			if lost := t.fileLost(); lost != "" {
				return false, fmt.Errorf("mysql redo copy at LSN %d: %s", t.cur, lost)
			}
			return false, nil // the archiver is behind the server's writes
		case t.file == t.arch || flushed <= t.cur:
			return false, nil
		}
		return t.nextFile()
	}
	if final {
		return t.finalBlock(ctx, flushed)
	}
	limit := min(flushed/BlockSize*BlockSize, t.file.EndLSN, t.cur+uint64(len(t.buf)))
	if stopping {
		limit = min(limit, e/BlockSize*BlockSize) // the block of E is finalBlock's
	}
	if limit > t.cur {
		return t.copyBlocks(limit)
	}
	return false, nil
}

// followArchive switches the copy to Config.Archive once the archive's first block
// is known and the copy has reached it, and refreshes how much the archive holds.
func (t *Tailer) followArchive() error {
	if t.cfg.Archive == nil {
		return nil
	}
	if t.arch == nil {
		a, err := openArchive(t.cfg.Archive.Path())
		if err != nil || a == nil {
			return err
		}
		t.arch = a
		t.archStart.Store(a.StartLSN)
	}
	if t.file != t.arch && t.cur >= t.arch.StartLSN {
		t.file.fh.Close()
		t.file = t.arch
	}
	return t.arch.refresh()
}

// flushArchive asks the server to archive the block being filled, at most once a
// second: the copy's last block is usually partial.
func (t *Tailer) flushArchive(ctx context.Context) error {
	if time.Since(t.archFlush) < time.Second {
		return nil
	}
	t.archFlush = time.Now()
	return t.cfg.Archive.Flush(ctx)
}

// copyBlocks copies the blocks from t.cur to limit, all below the flushed LSN and
// so all full, up to the first that does not validate.
func (t *Tailer) copyBlocks(limit uint64) (bool, error) {
	buf := t.buf[:limit-t.cur]
	n, err := t.file.fh.ReadAt(buf, t.file.offset(t.cur))
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read redo file %s: %w", t.file.Path, err)
	}
	good, reason, err := t.validPrefix(buf[:n/BlockSize*BlockSize])
	if err != nil {
		return false, err
	}
	if reason == "" && good*BlockSize < len(buf) {
		reason = fmt.Sprintf("short read: %d of %d bytes", n, len(buf))
	}
	if good > 0 {
		if err := t.emit(buf[:good*BlockSize], t.cur+uint64(good*BlockSize)); err != nil {
			return false, err
		}
	}
	if reason != "" {
		return good > 0, t.invalid(t.cur, good > 0, reason)
	}
	return true, nil
}

// validPrefix returns how many leading blocks of b (from t.cur) are valid and
// full, and why the next one is not. A newer block there means the file was
// reused: *OverwrittenError.
func (t *Tailer) validPrefix(b []byte) (int, string, error) {
	for i := 0; i < len(b); i += BlockSize {
		lsn := t.cur + uint64(i)
		info, err := inspectBlock(b[i:i+BlockSize], lsn)
		switch {
		case err != nil:
			return 0, "", err
		case info.kind == blockAhead:
			return 0, "", t.lapped(info.reason)
		case info.kind != blockValid:
			return i / BlockSize, info.reason, nil
		case info.dataLen < BlockSize:
			return i / BlockSize, fmt.Sprintf("partial block (data_len %d) below the flushed LSN", info.dataLen), nil
		}
	}
	return len(b) / BlockSize, "", nil
}

// finalBlock copies the block holding the stop LSN E once the server has flushed
// E, as it is on disk (data_len at least E%512). A block holding no data yet when
// E is its first data byte is written as an empty block.
func (t *Tailer) finalBlock(ctx context.Context, flushed uint64) (bool, error) {
	e, ok := t.stop.get()
	if !ok || e/BlockSize*BlockSize != t.cur || flushed < e {
		return false, nil
	}
	b := t.buf[:BlockSize]
	if _, err := t.file.fh.ReadAt(b, t.file.offset(t.cur)); err != nil {
		return false, t.invalid(t.cur, false, fmt.Sprintf("read: %v", err))
	}
	info, err := inspectBlock(b, t.cur)
	switch {
	case err != nil:
		return false, err
	case info.kind == blockValid && info.dataLen >= int(e%BlockSize):
	case e%BlockSize == blockHdrSize:
		b, info.dataLen = emptyBlock(t.cur), blockHdrSize
	case info.kind == blockAhead:
		return false, t.lapped(info.reason)
	case info.kind == blockValid && t.file == t.arch:
		return false, t.flushArchive(ctx) // archived partial, before E was written
	case info.kind == blockValid:
		return false, t.invalid(t.cur, false, fmt.Sprintf("data_len %d ends before the stop LSN %d", info.dataLen, e))
	default:
		return false, t.invalid(t.cur, false, info.reason)
	}
	return true, t.emit(b, t.cur+uint64(info.dataLen))
}

// emit writes blocks to Out and publishes copied as the new Copied().
func (t *Tailer) emit(b []byte, copied uint64) error {
	if _, err := t.cfg.Out.Write(b); err != nil {
		return fmt.Errorf("write backup redo log at LSN %d: %w", t.cur, err)
	}
	t.cur += uint64(len(b))
	t.prog.advance(copied)
	return nil
}

// nextFile switches to the file after the one fully copied. The server flushed
// beyond its end, so the next file exists unless the server consumed it already.
func (t *Tailer) nextFile() (bool, error) {
	id := t.file.ID + 1
	path := filepath.Join(t.cfg.Dir, FileName(id))
	nf, err := openRedoFile(path, id)
	if err == nil && nf.StartLSN == t.cur && nf.Header.UUID == t.head.UUID {
		if err := checkFlags(nf.File); err != nil {
			nf.fh.Close()
			return false, err
		}
		t.file.fh.Close()
		t.file = nf
		return true, nil
	}
	reason := fmt.Sprint(err)
	if err == nil {
		nf.fh.Close()
		reason = fmt.Sprintf("it starts at LSN %d with log_uuid %#x, want LSN %d and %#x", nf.StartLSN, nf.Header.UUID, t.cur, t.head.UUID)
	}
	if t.bad != t.cur+1 {
		t.bad = t.cur + 1
		return false, nil // retry once
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, t.lapped(fmt.Sprintf("the next redo file %s is gone: the server consumed it", FileName(id)))
	}
	return false, fmt.Errorf("%w: redo file %s does not continue %s: %s", ErrCorrupt, path, t.file.Path, reason)
}

// invalid handles a block at lsn that did not validate although the server has
// flushed it. The first time (or after progress) it only asks for a re-read; the
// second time it is a lost file (*OverwrittenError) or corruption.
func (t *Tailer) invalid(lsn uint64, progressed bool, reason string) error {
	if progressed || t.bad != lsn+1 {
		t.bad = lsn + 1
		return nil
	}
	if lost := t.fileLost(); lost != "" {
		return t.lapped(fmt.Sprintf("%s, and the block at LSN %d is %s", lost, lsn, reason))
	}
	return corruptError(lsn, t.file, reason)
}

// lapped builds the error for a log the server overwrote before it was copied.
func (t *Tailer) lapped(detail string) error {
	return &OverwrittenError{Copied: t.Copied(), Server: t.srvAt, File: t.file.Path, Detail: detail}
}

// fileLost says how the open file stopped being the server's file for its LSN
// range (removed, recycled, reused), or "" if it still is.
func (t *Tailer) fileLost() string {
	if t.file == t.arch {
		if _, err := os.Stat(t.file.Path); err != nil {
			return "the server deleted its redo log archive (the session that started it ended)"
		}
		return "" // an archive is only appended to
	}
	st, err := os.Stat(t.file.Path)
	if err != nil {
		return "the server removed or recycled the file"
	}
	if fst, err := t.file.fh.Stat(); err != nil || !os.SameFile(st, fst) {
		return "the server recycled the file"
	}
	head := make([]byte, BlockSize)
	if _, err := t.file.fh.ReadAt(head, 0); err != nil {
		return fmt.Sprintf("its header cannot be read (%v)", err)
	}
	if h, err := ParseHeader(head); err != nil || h.StartLSN != t.file.StartLSN {
		return "the server reused the file for newer log"
	}
	return ""
}

// checkEnd fails if the server disabled redo logging: the header of the file being
// read or of the newest file says so.
func (t *Tailer) checkEnd() error {
	if t.file != t.arch {
		f, err := readFile(t.file.Path, t.file.ID)
		if err == nil {
			err = checkFlags(f)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	files, err := ListFiles(t.cfg.Dir)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		return checkFlags(files[len(files)-1])
	}
	return nil
}

// idle waits for Poll, a StopAt call or the end of ctx.
func (t *Tailer) idle(ctx context.Context) error {
	timer := time.NewTimer(t.cfg.Poll)
	defer timer.Stop()
	stopped := t.stop.ch
	if _, ok := t.stop.get(); ok {
		stopped = nil // already set: only the timer or ctx can end the wait
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stopped:
	case <-timer.C:
	}
	return nil
}

// offset returns the file offset of lsn, which lies in f's range.
func (f *openFile) offset(lsn uint64) int64 { return f.base + int64(lsn-f.StartLSN) }
