package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/redo"
)

// Ahead is a redo log parsed in the background before the datadir it rolls forward is
// complete: a restore parses the backup's log while it copies the data files, on a
// core the copy leaves idle, so that Dir (given it as Config.Ahead) only rolls the
// pages. Only an unencrypted log whose records fit one batch is parsed ahead. Dir uses the
// result only if the log in its datadir is the same file (size and CRC-32C) and the
// parse succeeded; otherwise it parses its log itself, so an Ahead never changes what
// Dir does, only when the parsing happens.
type Ahead struct {
	path     string
	pageSize int
	cancel   context.CancelFunc
	done     chan struct{}
	// Set before done is closed.
	size int64
	crc  uint32
	b    *batch
	logs map[uint32]*spaceLog
	ll   redo.LinearLog
	took time.Duration
	err  error
}

// errAheadTooBig: the log's records do not fit one batch: Dir reads it in two passes.
var errAheadTooBig = errors.New("the log's records do not fit one batch")

// ParseAhead starts parsing the log at path (a backup's ib_logfile0) for a datadir of
// pageSize pages, holding at most memory bytes of records (0: Config's default).
// Close stops it.
func ParseAhead(ctx context.Context, path string, pageSize, memory int) *Ahead {
	if pageSize == 0 {
		pageSize = 16384
	}
	if memory <= 0 {
		memory = defaultMemory
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &Ahead{path: path, pageSize: pageSize, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t0 := time.Now()
		h.err = h.parse(ctx, memory)
		h.took = time.Since(t0)
	}()
	return h
}

// parse reads the log's size and CRC-32C, then parses it into one batch.
func (h *Ahead) parse(ctx context.Context, memory int) error {
	st, err := os.Stat(h.path)
	if err != nil {
		return err
	}
	if st.Size()-int64(redo.StartOffset) > int64(memory)/2*3 {
		return errAheadTooBig // as Dir: not tried in one batch
	}
	if h.size, h.crc, err = filecopy.FileCRC(h.path); err != nil {
		return err
	}
	p := &parser{b: newBatch(make([]byte, 0, min(h.size, int64(memory))+redo.MTRSizeMax)), spaces: map[uint32]*spaceLog{},
		pageSize: h.pageSize, inject: faultpoint.Fails("apply-record")}
	h.ll, err = redo.ScanLinear(h.path, nil, "", func(m redo.MTR) error {
		if err := p.add(m); err != nil {
			return err
		}
		if len(p.b.arena) >= memory {
			return errAheadTooBig
		}
		return ctx.Err()
	})
	h.b, h.logs = p.b, p.spaces
	return err
}

// Close stops a parse still running and waits for it to end.
func (h *Ahead) Close() {
	h.cancel()
	<-h.done
}

// take waits for the parse and returns it if it is of the log at logPath, parsed for
// pageSize pages without error; ok false (and why, for the log) otherwise.
func (h *Ahead) take(ctx context.Context, logPath string, pageSize int) (ok bool, why string, err error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return false, "", ctx.Err()
	}
	switch {
	case h.err != nil:
		return false, "parsing ahead: " + h.err.Error(), nil
	case h.pageSize != pageSize:
		return false, fmt.Sprintf("parsed ahead for %d-byte pages, not %d", h.pageSize, pageSize), nil
	}
	same, err := sameLog(logPath, h.size, h.crc)
	if err != nil {
		return false, "", fmt.Errorf("%w: %w", errUnsupported, err)
	}
	if !same {
		return false, "the log in the copy is not the one parsed ahead", nil
	}
	return true, "", nil
}

// sameLog tells whether the log at path is size bytes with CRC-32C crc, followed by
// nothing but zeros (a restore pads the log it recovers to whole MiB).
func sameLog(path string, size int64, crc uint32) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	var got uint32
	var off int64
	for {
		n, err := f.Read(buf)
		b := buf[:n]
		if head := min(int64(n), max(0, size-off)); head > 0 {
			got = checksum.Update(got, b[:head])
			b = b[head:]
		}
		if slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
			return false, nil
		}
		off += int64(n)
		if err == io.EOF {
			return off >= size && got == crc, nil
		}
		if err != nil {
			return false, err
		}
	}
}
