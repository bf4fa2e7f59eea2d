package codec

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/ferry-backup/ferry/internal/setting"
)

// DefaultLevel is the zstd level used unless --compress-level says otherwise: the
// fastest, since a backup is usually limited by how fast it can be made.
const DefaultLevel = 1

// Compressor turns independent blocks into complete frames; frames concatenate into a
// valid stream. It is safe for concurrent use.
type Compressor interface {
	// Compress appends the frame of src to dst[:0] and returns it.
	Compress(dst, src []byte) ([]byte, error)
}

// NewCompressor returns the compressor of c at level (0: the default level); nil for
// None.
func NewCompressor(c Compression, level, concurrency int) (Compressor, error) {
	switch c {
	case None:
		return nil, nil
	case Zstd:
		if level == 0 {
			level = DefaultLevel
		}
		if level < 1 || level > 22 {
			return nil, setting.Errorf("zstd %s %d: use 1 (fastest) to 22", setting.CompressLevel, level)
		}
		return newZstd(level, concurrency)
	case LZ4:
		return newLZ4Compressor(level)
	}
	return nil, fmt.Errorf("unknown compression %q", c)
}

// lz4Compressor keeps a pool of frame writers (each writes one frame per block).
type lz4Compressor struct {
	pool sync.Pool
	opts []lz4.Option
}

func newLZ4Compressor(level int) (*lz4Compressor, error) {
	lvl := lz4.Fast
	if level > 1 {
		if level > 9 {
			return nil, setting.Errorf("lz4 %s %d: use 1 (fastest) to 9", setting.CompressLevel, level)
		}
		lvl = lz4.CompressionLevel(1 << (8 + level))
	}
	c := &lz4Compressor{opts: []lz4.Option{lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(true),
		lz4.CompressionLevelOption(lvl), lz4.ConcurrencyOption(1)}}
	return c, nil
}

type lz4Frame struct {
	w   *lz4.Writer
	buf bytes.Buffer
}

func (c *lz4Compressor) Compress(dst, src []byte) ([]byte, error) {
	f, _ := c.pool.Get().(*lz4Frame)
	if f == nil {
		f = &lz4Frame{w: lz4.NewWriter(nil)}
		if err := f.w.Apply(c.opts...); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
	}
	defer c.pool.Put(f)
	f.buf = *bytes.NewBuffer(dst[:0])
	f.w.Reset(&f.buf)
	if _, err := f.w.Write(src); err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	if err := f.w.Close(); err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	out := f.buf.Bytes()
	f.buf = bytes.Buffer{}
	return out, nil
}

// MaxZstdWindow bounds the window a zstd frame may ask a decoder to keep: ferry
// compresses 1 MiB blocks into frames of their own, whose window is at most 1 MiB, so
// a frame asking for more is not ferry's and is refused instead of allocated.
const MaxZstdWindow = 2 << 20

// MaxDecoderMemory bounds what one decoder holds (a zstd window and block, or an lz4
// block and its copy), for the memory budget of a reader of many files at once.
const MaxDecoderMemory = 8 << 20

// NewReader decodes a stream of concatenated frames of c read from r.
func NewReader(c Compression, r io.Reader) (io.ReadCloser, error) {
	switch c {
	case None:
		return io.NopCloser(r), nil
	case Zstd:
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(MaxZstdWindow))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return zstdReader{d}, nil
	case LZ4:
		return io.NopCloser(lz4.NewReader(r)), nil
	}
	return nil, fmt.Errorf("unknown compression %q", c)
}

type zstdReader struct{ *zstd.Decoder }

func (z zstdReader) Close() error { z.Decoder.Close(); return nil }

// Decoder decodes one stream of c after another, keeping its state between them: a
// reader of many small blobs allocates a zstd decoder (its window and block buffers)
// once, not once per blob. It is not safe for concurrent use.
type Decoder struct {
	c    Compression
	zstd *zstd.Decoder
}

// NewDecoder returns a Decoder of streams of c.
func NewDecoder(c Compression) (*Decoder, error) {
	switch c {
	case None, LZ4:
		return &Decoder{c: c}, nil
	case Zstd:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(MaxZstdWindow))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return &Decoder{c: c, zstd: d}, nil
	}
	return nil, fmt.Errorf("unknown compression %q", c)
}

// Reset starts decoding the stream r; the reader it returns is valid until the next
// Reset or Close.
func (d *Decoder) Reset(r io.Reader) (io.Reader, error) {
	switch d.c {
	case Zstd:
		if err := d.zstd.Reset(r); err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return d.zstd, nil
	case LZ4:
		return lz4.NewReader(r), nil
	}
	return r, nil
}

// Close releases the decoder's state.
func (d *Decoder) Close() {
	if d.zstd != nil {
		d.zstd.Close()
	}
}
