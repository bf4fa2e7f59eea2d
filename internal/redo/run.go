package redo

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Run writes the backup log header to Out and then copies mini-transactions
// from the start checkpoint on, following the server as it writes. It
// returns nil once StopAt was called and every mini-transaction starting
// below the stop LSN has been copied (EndLSN then tells where the copy
// ended); *OverwrittenError if the server lapped the copy; an error wrapping
// ErrCorrupt for an invalid mini-transaction below the flushed LSN; the
// context's error on cancellation. Run may be called once.
func (t *Tailer) Run(ctx context.Context) (err error) {
	if !t.ran.CompareAndSwap(false, true) {
		return errors.New("redo tailer: Run called twice")
	}
	defer func() {
		t.closeFiles()
		t.prog.finish(t.cur, err)
	}()
	if _, err := t.cfg.Out.Write(BackupHeader(t.log.hdr, t.start, t.cfg.Creator)); err != nil {
		return fmt.Errorf("write backup redo log header: %w", err)
	}
	for {
		done, err := t.step(ctx)
		if err != nil || done {
			return err
		}
	}
}

// step does one round: stop check, resize check, read, lap check, parse and
// copy. It sleeps for Poll when there was nothing to copy.
func (t *Tailer) step(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if t.stop.reached(t.cur) {
		return true, nil
	}
	if err := t.followResize(); err != nil {
		return false, err
	}
	flushed, _, err := t.cfg.Server.LSNs(ctx)
	if err != nil {
		return false, fmt.Errorf("redo tailer: %w", err)
	}
	limit := t.readLimit(flushed)
	if limit <= t.cur {
		return false, t.idle(ctx)
	}
	n := min(limit-t.cur, uint64(t.cfg.ReadSize), t.log.ring.capacity-lapMargin)
	data, err := t.log.readLSN(t.buf, t.cur, int(n))
	if err != nil {
		return false, fmt.Errorf("redo tailer: %w", err)
	}
	if err := t.checkLap(ctx); err != nil {
		return false, err
	}
	progressed, err := t.copyMtrs(data)
	if err != nil || progressed {
		return false, err
	}
	return false, t.idle(ctx)
}

// readLimit is the LSN below which the file being read holds complete,
// durable log: the flushed LSN, or while an old file is drained after an
// online resize, the first LSN of its replacement.
func (t *Tailer) readLimit(flushed uint64) uint64 {
	if t.next != nil {
		return min(flushed, t.next.ring.first)
	}
	return flushed
}

// checkLap fails if the server may have overwritten the region just read:
// its current LSN (read after the read) plus a margin for the whole blocks
// it writes beyond it reaches the copy position plus the capacity.
func (t *Tailer) checkLap(ctx context.Context) error {
	if t.next != nil {
		return nil // the old file of a resize is no longer written
	}
	_, current, err := t.cfg.Server.LSNs(ctx)
	if err != nil {
		return fmt.Errorf("redo tailer: %w", err)
	}
	if current+lapMargin >= t.cur+t.log.ring.capacity {
		return &OverwrittenError{Copied: t.cur, Server: current, Capacity: t.log.ring.capacity}
	}
	return nil
}

// idle waits for Poll, a StopAt call or the end of ctx.
func (t *Tailer) idle(ctx context.Context) error {
	timer := time.NewTimer(t.cfg.Poll)
	defer timer.Stop()
	stopped := t.stop.ch
	if t.stop.isSet() {
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

// closeFiles closes the log file(s).
func (t *Tailer) closeFiles() {
	t.log.close()
	if t.next != nil {
		t.next.close()
	}
}
