package stream_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/sink/sinktest"
	"github.com/ferry-backup/ferry/internal/stream"
)

// syncBuffer is the stream's reading end: the bytes written so far.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// streamStored decodes what was written with ferry's own stream reader, into a
// directory, and checks each file against the manifest, as restore does; a stream
// without its manifest is no backup.
type streamStored struct {
	t   *testing.T
	out *syncBuffer
}

func (s streamStored) Load(ctx context.Context, _ string) (*manifest.Manifest, map[string][]byte, error) {
	dir := s.t.TempDir()
	got, err := stream.Unpack(ctx, bytes.NewReader(s.out.bytes()), dir, stream.UnpackOptions{MaxMemory: 16 << 20})
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Read(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := sinktest.CheckSums(m, func(p string) (int64, uint32, bool) {
		f, ok := got.Files[p]
		return f.Size, f.CRC, ok
	}); err != nil {
		return nil, nil, err
	}
	files, err := sinktest.ReadTree(dir)
	return m, files, err
}

// TestStreamConformance runs the Sink suite on a compressed stream.
func TestStreamConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Stored) {
		out := &syncBuffer{}
		s, err := stream.NewSink(out, stream.Options{Compression: codec.Zstd, Workers: 2, MaxMemory: 64 << 20, BlockSize: 1 << 20, OpenFiles: 8})
		if err != nil {
			t.Fatal(err)
		}
		return s, streamStored{t, out}
	})
}
