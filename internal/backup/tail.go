package backup

import (
	"bufio"
	"context"
	"fmt"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
)

// tailer runs the redo copy into the backup's ib_logfile0 in the background.
type tailer struct {
	t    *redo.Tailer
	f    storeFile
	w    *bufio.Writer
	sum  *sumWriter
	done chan error
}

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
	f, err := j.store.create("ib_logfile0", false)
	if err != nil {
		return fmt.Errorf("create backup redo log: %w", err)
	}
	w := bufio.NewWriterSize(&appender{f: f}, 1<<20)
	sum := &sumWriter{w: w}
	t, err := redo.Open(redo.Config{
		Path:     j.redoPath(),
		Out:      sum,
		Server:   mariadb.LSNSource{DB: j.db},
		Creator:  "Backup ferry " + j.cfg.Version,
		OnFileOp: j.addOp,
	})
	if err != nil {
		f.Close(0)
		return err
	}
	j.tail = &tailer{t: t, f: f, w: w, sum: sum, done: make(chan error, 1)}
	j.cfg.Monitor.set(t.Copied, func() (uint64, error) {
		_, cur, err := mariadb.LSNSource{DB: j.db}.LSNs(ctx)
		return cur, err
	}, j.redoCapacity())
	go func() {
		err := t.Run(ctx)
		if err != nil {
			fail(err)
		}
		j.tail.done <- err
	}()
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

// finishTail stops the copy at end (an mtr boundary at or after it) and records the file.
func (j *job) finishTail(end uint64) (uint64, error) {
	j.tail.t.StopAt(end)
	if err := <-j.tail.done; err != nil {
		j.tail.f.Close(j.tail.sum.n)
		return 0, err
	}
	if err := j.tail.w.Flush(); err != nil {
		j.tail.f.Close(j.tail.sum.n)
		return 0, fmt.Errorf("write backup redo log: %w", filecopy.WrapWriteErr(err))
	}
	if err := j.tail.f.Close(j.tail.sum.n); err != nil {
		return 0, fmt.Errorf("write backup redo log: %w", filecopy.WrapWriteErr(err))
	}
	j.record(copiedFile{Rel: "ib_logfile0", Size: j.tail.sum.n, CRC: j.tail.sum.crc, Kind: "redo"})
	return j.tail.t.EndLSN(), nil
}

// appender writes a storeFile sequentially.
type appender struct {
	f   storeFile
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
