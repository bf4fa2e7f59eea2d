package stream

import (
	"errors"
	"fmt"
	"io"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/directio"
)

// write decodes one file's payloads (decrypt, then decompress) into dst.
func (u *unpacker) write(f *inFile, dst, path string, comp codec.Compression, enc bool) (FileSum, error) {
	src := &chanReader{u: u, ch: f.ch}
	defer src.drain()
	var r io.Reader = src
	if enc {
		d, err := codec.Decrypt(src, u.o.Identities)
		if err != nil {
			return FileSum{}, err
		}
		r = d
	}
	dec, err := codec.NewReader(comp, r)
	if err != nil {
		return FileSum{}, err
	}
	defer dec.Close()
	sum, err := u.copyOut(dec, dst, path)
	if err != nil {
		return sum, err
	}
	if n, err := src.rest(); err != nil || n > 0 {
		return sum, fmt.Errorf("%d stray bytes after the end of the encoded data (damaged stream)", n)
	}
	return sum, nil
}

// copyOut writes the decoded bytes with large aligned writes, checksumming them, and
// tells the file's follower, if any, of each write.
func (u *unpacker) copyOut(r io.Reader, dst, path string) (sum FileSum, err error) {
	out := newOutFile(dst, path)
	out.discard = u.o.Keep != nil && !u.o.Keep(path)
	defer out.close()
	var fw Follower
	if u.o.Follow != nil && !out.discard {
		fw = u.o.Follow(path)
	}
	if fw != nil {
		defer func() {
			if err != nil {
				fw.Fail(err)
			}
		}()
	}
	buf := u.getBuf()
	defer u.putBuf(buf)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if werr := out.write(buf[:n], sum.Size); werr != nil {
				return sum, werr
			}
			if fw != nil {
				fw.Wrote(sum.Size, int64(n))
			}
			sum.CRC = checksum.Update(sum.CRC, buf[:n])
			sum.Size += int64(n)
			if u.o.Progress != nil {
				u.o.Progress(int64(n))
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if err := out.finish(sum.Size); err != nil {
				return sum, err
			}
			if fw != nil {
				fw.Complete(sum.Size)
			}
			return sum, nil
		}
		if err != nil {
			return sum, decodeErr(err, sum.Size)
		}
	}
}

// decodeErr names where in the decoded file the data went bad.
func decodeErr(err error, at int64) error {
	var se *streamErr
	if errors.As(err, &se) {
		return se.err
	}
	return fmt.Errorf("damaged data after decoded byte %d: %w", at, err)
}

// streamErr carries an error of the stream itself through the decoders unchanged.
type streamErr struct{ err error }

func (e *streamErr) Error() string { return e.err.Error() }

// chanReader reads a file's payloads in order, releasing their memory as they are used.
type chanReader struct {
	u   *unpacker
	ch  chan []byte
	cur []byte
	n   int64 // size of cur when received, for the budget
}

func (c *chanReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		c.release()
		select {
		case b, ok := <-c.ch:
			if !ok {
				return 0, io.EOF
			}
			c.cur, c.n = b, min(int64(len(b)), c.u.o.MaxMemory)
		case <-c.u.ctx.Done():
			return 0, &streamErr{c.u.ctx.Err()}
		}
	}
	k := copy(p, c.cur)
	c.cur = c.cur[k:]
	return k, nil
}

func (c *chanReader) release() {
	if c.n > 0 {
		c.u.mem.Release(c.n)
		c.n = 0
	}
}

// rest counts the bytes left after the decoder stopped (there should be none).
func (c *chanReader) rest() (int64, error) {
	n, err := io.Copy(io.Discard, c)
	var se *streamErr
	if errors.As(err, &se) {
		return n, se.err
	}
	return n, err
}

// drain releases everything still queued so the dispatcher never blocks on a failed file.
func (c *chanReader) drain() {
	c.cur = nil
	c.release()
	for {
		select {
		case b, ok := <-c.ch:
			if !ok {
				return
			}
			c.u.mem.Release(min(int64(len(b)), c.u.o.MaxMemory))
		case <-c.u.ctx.Done():
			return
		}
	}
}

// copyBuf is the size of a writer's copy buffer.
const copyBuf = 1 << 20

// getBuf returns a copy buffer, one a finished writer left if there is one.
func (u *unpacker) getBuf() []byte {
	select {
	case b := <-u.bufs:
		return b
	default:
		return directio.AlignedBuffer(copyBuf)
	}
}

// putBuf keeps a copy buffer for the next writer (at most one per writer).
func (u *unpacker) putBuf(b []byte) {
	select {
	case u.bufs <- b:
	default:
	}
}
