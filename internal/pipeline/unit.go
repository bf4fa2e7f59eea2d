package pipeline

import (
	"fmt"
	"io"

	"github.com/ferry-backup/ferry/internal/codec"
)

// Unit is one sequence of bytes being encoded into its sink, strictly in order: the
// blocks are compressed in parallel and reach the sink (through the encryption, if
// any) in the order they were written.
type Unit struct {
	e     *Encoder
	name  string // for errors
	sink  io.Writer
	size  int64
	cur   *block
	queue chan *block // blocks in order, waiting for their worker
	done  chan error  // result of the emitter
	raw   bool        // bytes go to the sink as they are
	// keeps: the unit may keep a partial block between writes (one of the encoder's
	// OpenFiles); without it, each write ends by submitting its partial block.
	keeps bool
	// compress: blocks go through the workers' compressor (else they only keep the
	// unit's order on their way to the encryption).
	compress bool
}

// Start begins a unit named name (for errors) whose encoded bytes go to sink.
// compress says whether the encoder's compression applies; encryption always does.
// The sink is written by one goroutine at a time.
func (e *Encoder) Start(name string, sink io.Writer, compress bool) (*Unit, error) {
	if err := e.Err(); err != nil {
		return nil, err
	}
	compress = compress && e.opts.Compression != codec.None
	u := &Unit{e: e, name: name, sink: sink, compress: compress}
	u.raw = !compress && !e.opts.Encrypted()
	if u.raw {
		return u, nil
	}
	u.keeps = e.takeKeep()
	u.queue = make(chan *block, 2*e.opts.Workers)
	u.done = make(chan error, 1)
	out, enc := sink, io.WriteCloser(nil)
	if e.opts.Encrypted() {
		w, err := codec.Encrypt(sink, e.opts.Recipients)
		if err != nil {
			return nil, err
		}
		out, enc = w, w
	}
	go u.emit(out, enc)
	return u, nil
}

// Size is the number of bytes written to the unit so far.
func (u *Unit) Size() int64 { return u.size }

// Write appends p to the unit.
func (u *Unit) Write(p []byte) (int, error) {
	if u.raw {
		return u.writeRaw(p)
	}
	n := 0
	for len(p) > 0 {
		if u.cur == nil {
			u.cur = u.e.getBlock()
		}
		k := copy(u.cur.in[u.cur.n:], p)
		u.cur.n += k
		n += k
		p = p[k:]
		if u.cur.n == len(u.cur.in) {
			if err := u.submit(); err != nil {
				return n, err
			}
		}
	}
	u.size += int64(n)
	if u.cur != nil && !u.keeps {
		if u.keeps = u.e.takeKeep(); !u.keeps {
			return n, u.submit() // a short block: holding it could starve the pool
		}
	}
	return n, nil
}

// writeRaw passes p to the sink at once, in pieces of at most one block.
func (u *Unit) writeRaw(p []byte) (int, error) {
	if err := u.e.Err(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), u.e.opts.BlockSize)
		if _, err := u.sink.Write(p[:k]); err != nil {
			return n, u.e.Fail(fmt.Errorf("%s: %w", u.name, err))
		}
		n += k
		p = p[k:]
	}
	u.size += int64(n)
	return n, nil
}

// submit hands the current block to the workers, keeping the unit's order.
func (u *Unit) submit() error {
	b := u.cur
	u.cur = nil
	if err := u.e.Err(); err != nil {
		u.e.putBlock(b)
		return err
	}
	b.compress = u.compress
	u.queue <- b
	u.e.jobs <- b
	return nil
}

// emit writes the unit's blocks in order as they come back from the workers, through
// the encryption if any, then finishes the encryption.
func (u *Unit) emit(out io.Writer, enc io.WriteCloser) {
	var err error
	for b := range u.queue {
		<-b.ready
		if err == nil {
			err = b.err
		}
		if err == nil {
			if _, werr := out.Write(b.out); werr != nil {
				err = werr
			}
		}
		if err != nil {
			u.e.Fail(fmt.Errorf("%s: %w", u.name, err))
		}
		u.e.putBlock(b)
	}
	if err == nil && enc != nil {
		err = enc.Close()
	}
	u.done <- err
}

// Close encodes what is left; when it returns, the sink has received every byte.
func (u *Unit) Close() error {
	if u.raw {
		return u.e.Err()
	}
	var err error
	if u.cur != nil && u.cur.n > 0 {
		err = u.submit()
	} else if u.cur != nil {
		u.e.putBlock(u.cur)
		u.cur = nil
	}
	if u.keeps {
		u.keeps = false
		u.e.keep.Add(1)
	}
	close(u.queue)
	if eerr := <-u.done; err == nil {
		err = eerr
	}
	if err != nil {
		return u.e.Fail(fmt.Errorf("%s: %w", u.name, err))
	}
	return nil
}
