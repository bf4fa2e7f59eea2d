package redo

import (
	"fmt"
	"sync"
)

// pipeFrames is how many chunks of the log are in flight between the two stages of
// runPipelined: one being framed, one waiting, one being handed out.
const pipeFrames = 3

// scanFrame is a chunk of the log and the mini-transactions found whole in it, from the
// scan's start LSN on.
type scanFrame struct {
	buf  []byte
	mtrs []framedMTR
	// end: the scan stops after this chunk, at lsn (the scanner's n mini-transactions
	// read), with err (nil: the log's valid end).
	end bool
	lsn uint64
	n   int
	err error
}

// framedMTR is a mini-transaction of a frame and its ordinal in the log.
type framedMTR struct {
	MTR
	n int
}

// runPipelined is run with the framing of mini-transactions (their record headers
// walked, their CRC-32C checked: about a third of a parse's work) on a goroutine of
// its own, up to two chunks ahead of fn, so that a parse uses two cores. A log that
// is decrypted is scanned by run. It returns the LSN and count the scan ends at: the
// end of the valid log, or the mini-transaction fn failed on. The framing goroutine
// owns the scanner and the reader until it ends, which it does before runPipelined
// returns (after its read in progress, if fn fails: a reader that waits for a log
// being written returns once the log grows, or its context ends).
func (s *scanner) runPipelined(from uint64, fn func(MTR) error) (uint64, int, error) {
	free := make(chan *scanFrame, pipeFrames)
	for range pipeFrames {
		free <- &scanFrame{}
	}
	out, done := make(chan *scanFrame, pipeFrames), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.frames(from, free, out, done)
	}()
	defer wg.Wait()
	defer close(done)
	for f := range out {
		for i := range f.mtrs {
			if err := fn(f.mtrs[i].MTR); err != nil {
				return f.mtrs[i].Start, f.mtrs[i].n, err
			}
		}
		if f.end {
			return f.lsn, f.n, f.err
		}
		free <- f // never blocks: free holds every frame
	}
	return 0, 0, fmt.Errorf("internal error: the redo scan stopped without its end")
}

// frames reads the log chunk by chunk into frames taken from free, frames the
// mini-transactions of each and sends it to out, until the log ends or done closes.
func (s *scanner) frames(from uint64, free <-chan *scanFrame, out chan<- *scanFrame, done <-chan struct{}) {
	defer close(out)
	f := take(free, done)
	if f == nil {
		return
	}
	s.buf, s.pos = f.buf[:0], 0
	for {
		m := parseMtr(s.buf[s.pos:], s.lsn, s.g.seqBit, s.nonce)
		switch m.status {
		case mtrPremature:
			if s.eof {
				f.err = s.endErr()
				s.finish(f, out, done)
				return
			}
			next := take(free, done)
			if next == nil || !send(f, out, done) {
				return
			}
			f = next
			err := s.nextChunk(f)
			if err != nil {
				f.err = err
				s.finish(f, out, done)
				return
			}
			continue
		case mtrInvalid:
			s.finish(f, out, done) // zeros or garbage end the log, as for the server
			return
		}
		if s.lsn >= from {
			b := s.buf[s.pos : s.pos+m.size]
			f.mtrs = append(f.mtrs, framedMTR{MTR: MTR{Start: s.lsn, End: s.lsn + uint64(m.size), Recs: b[:m.seq]}, n: s.n})
		}
		s.pos += m.size
		s.lsn += uint64(m.size)
		s.n++
	}
}

// nextChunk moves the unparsed tail of the scanner's chunk to the start of f's buffer
// and reads the next chunk after it. The chunk before stays as it was: its frame's
// mini-transactions point into it.
func (s *scanner) nextChunk(f *scanFrame) error {
	tail := s.buf[s.pos:]
	if cap(f.buf) < len(tail)+scanChunk {
		f.buf = make([]byte, 0, len(tail)+scanChunk+MTRSizeMax)
	}
	f.buf = append(f.buf[:0], tail...)
	s.off += int64(s.pos)
	s.buf, s.pos = f.buf, 0
	err := s.readMore()
	f.buf = s.buf
	return err
}

// finish sends f as the scan's last frame.
func (s *scanner) finish(f *scanFrame, out chan<- *scanFrame, done <-chan struct{}) {
	f.end, f.lsn, f.n = true, s.lsn, s.n
	send(f, out, done)
}

// take returns an empty frame from free (nil once done closes).
func take(free <-chan *scanFrame, done <-chan struct{}) *scanFrame {
	select {
	case f := <-free:
		f.mtrs, f.end, f.err = f.mtrs[:0], false, nil
		return f
	case <-done:
		return nil
	}
}

// send sends f to out (false once done closes).
func send(f *scanFrame, out chan<- *scanFrame, done <-chan struct{}) bool {
	select {
	case out <- f:
		return true
	case <-done:
		return false
	}
}
