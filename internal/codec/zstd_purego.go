//go:build !cgo

package codec

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// newZstd returns the pure-Go zstd encoder (builds without cgo).
func newZstd(level, concurrency int) (Compressor, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderConcurrency(max(concurrency, 1)), zstd.WithEncoderCRC(true))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return zstdCompressor{enc}, nil
}

type zstdCompressor struct{ enc *zstd.Encoder }

func (z zstdCompressor) Compress(dst, src []byte) ([]byte, error) {
	return z.enc.EncodeAll(src, dst[:0]), nil
}
