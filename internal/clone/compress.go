package clone

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression modes of a clone.
const (
	CompressAuto = "auto"
	CompressNone = "none"
	CompressLZ4  = "lz4"
	CompressZstd = "zstd"
)

// ParseCompress checks a --compress value.
func ParseCompress(s string) (string, error) {
	switch s {
	case CompressAuto, CompressNone, CompressLZ4, CompressZstd:
		return s, nil
	}
	return "", setting.Errorf("%s %q: use auto, none, lz4 or zstd", setting.Compress, s)
}

// codecPicker chooses how each data frame travels. auto compresses only while the
// network is the bottleneck, that is while frames wait to be sent: on a slow link the
// spare CPU shrinks the bytes, on a fast one frames leave as they are made and the CPU
// stays on reading. Data that does not compress turns compression off for a while.
type codecPicker struct {
	mode   string
	budget int64 // the session's memory budget, the scale of "waiting"
	zstd   codec.Compressor
	lz4    codec.Compressor

	skip    atomic.Int32 // frames to send raw after one that did not compress
	rawIn   atomic.Int64 // raw bytes of frames sent compressed
	wireOut atomic.Int64 // their compressed bytes
	frames  [3]atomic.Int64
}

// autoWaiting is the share of the budget queued for the network above which auto
// compresses.
const autoWaiting = 0.25

func newCodecPicker(mode string, budget int64) (*codecPicker, error) {
	p := &codecPicker{mode: mode, budget: budget}
	var err error
	if mode == CompressAuto || mode == CompressZstd {
		if p.zstd, err = codec.NewCompressor(codec.Zstd, 1, 0); err != nil {
			return nil, err
		}
	}
	if mode == CompressLZ4 {
		if p.lz4, err = codec.NewCompressor(codec.LZ4, 0, 0); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// encode returns the codec and payload of raw bytes p; waiting is the share of the
// budget queued for the network.
func (p *codecPicker) encode(raw []byte, waiting float64) (byte, []byte, error) {
	c := p.choose(waiting)
	out := raw
	if c != codecNone {
		comp := p.zstd
		if c == codecLZ4 {
			comp = p.lz4
		}
		b, err := comp.Compress(nil, raw)
		if err != nil {
			return 0, nil, fmt.Errorf("compress: %w", err)
		}
		if p.mode == CompressAuto && len(b) > len(raw)*9/10 {
			p.skip.Store(64) // incompressible: leave the CPU alone for a while
		}
		if len(b) < len(raw) {
			p.rawIn.Add(int64(len(raw)))
			p.wireOut.Add(int64(len(b)))
			out = b
		} else {
			c = codecNone
		}
	}
	if c == codecNone {
		out = bytes.Clone(raw)
	}
	p.frames[c].Add(1)
	return c, out, nil
}

func (p *codecPicker) choose(waiting float64) byte {
	switch p.mode {
	case CompressNone:
		return codecNone
	case CompressLZ4:
		return codecLZ4
	case CompressZstd:
		return codecZstd
	}
	if p.skip.Load() > 0 {
		p.skip.Add(-1)
		return codecNone
	}
	if waiting >= autoWaiting {
		return codecZstd
	}
	return codecNone
}

// summary tells how frames travelled, for the log.
func (p *codecPicker) summary() (raw, zstd, lz4 int64, ratio float64) {
	ratio = 1
	if in := p.rawIn.Load(); in > 0 {
		ratio = float64(p.wireOut.Load()) / float64(in)
	}
	return p.frames[codecNone].Load(), p.frames[codecZstd].Load(), p.frames[codecLZ4].Load(), ratio
}

// decoder decodes data frames on the recipient; safe for concurrent use.
type decoder struct{ zstd *zstd.Decoder }

func newDecoder() (*decoder, error) {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxPayload*2))
	if err != nil {
		return nil, err
	}
	return &decoder{zstd: d}, nil
}

// decode returns the raw bytes of a data frame into dst (of f.rawLen bytes).
func (d *decoder) decode(f *frame, dst []byte) ([]byte, error) {
	switch f.codec {
	case codecNone:
		if len(f.payload) != int(f.rawLen) {
			return nil, fmt.Errorf("%w: raw frame of %d bytes announces %d", errProtocol, len(f.payload), f.rawLen)
		}
		return f.payload, nil
	case codecZstd:
		out, err := d.zstd.DecodeAll(f.payload, dst[:0])
		if err != nil {
			return nil, fmt.Errorf("decompress zstd frame: %w", err)
		}
		return out, nil
	case codecLZ4:
		n, err := io.ReadFull(lz4.NewReader(bytes.NewReader(f.payload)), dst[:f.rawLen])
		if err != nil {
			return nil, fmt.Errorf("decompress lz4 frame: %w", err)
		}
		return dst[:n], nil
	}
	return nil, fmt.Errorf("%w: unknown codec %d", errProtocol, f.codec)
}
