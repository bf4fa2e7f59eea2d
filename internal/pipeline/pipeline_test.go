package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/codec"
)

const testBlock = 4 << 10

// testData is n bytes that compress (runs of a repeated byte) but differ block by block.
func testData(n int, seed int64) []byte {
	r := rand.New(rand.NewSource(seed))
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, bytes.Repeat([]byte{byte(r.Intn(256))}, 1+r.Intn(200))...)
	}
	return out[:n]
}

// writeOdd writes p to u in pieces of uneven sizes, some across block boundaries.
func writeOdd(t *testing.T, u *Unit, p []byte) {
	t.Helper()
	sizes := []int{1, 7, testBlock - 1, 3 * testBlock, 999, testBlock}
	for i := 0; len(p) > 0; i++ {
		k := min(sizes[i%len(sizes)], len(p))
		n, err := u.Write(p[:k])
		if err != nil || n != k {
			t.Fatalf("Write(%d bytes) = %d, %v", k, n, err)
		}
		p = p[k:]
	}
}

// decode reverses a unit's encoding: decryption, then decompression.
func decode(t *testing.T, enc []byte, c codec.Compression, ids []age.Identity) []byte {
	t.Helper()
	var r io.Reader = bytes.NewReader(enc)
	if len(ids) > 0 {
		d, err := codec.Decrypt(r, ids)
		if err != nil {
			t.Fatal(err)
		}
		r = d
	}
	d, err := codec.NewReader(c, r)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return out
}

// TestUnitRoundTrip: every compression, with and without encryption, on several workers
// and several units at once: each unit's sink decodes to exactly the bytes written to
// it, in order, and compressed units are smaller.
func TestUnitRoundTrip(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []codec.Compression{codec.None, codec.Zstd, codec.LZ4} {
		for _, encrypt := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/encrypted=%v", c, encrypt), func(t *testing.T) {
				o := Options{Compression: c, Workers: 3, BlockSize: testBlock, OpenFiles: 2}
				var ids []age.Identity
				if encrypt {
					o.Recipients, ids = []age.Recipient{id.Recipient()}, []age.Identity{id}
				}
				o.MaxMemory = o.MinMemory()
				e, err := NewEncoder(o)
				if err != nil {
					t.Fatal(err)
				}
				var sinks [2]bytes.Buffer
				var data [2][]byte
				var wg sync.WaitGroup
				for i := range sinks {
					data[i] = testData(100<<10+i*333, int64(i))
					u, err := e.Start(fmt.Sprintf("unit%d", i), &sinks[i], true)
					if err != nil {
						t.Fatal(err)
					}
					wg.Go(func() {
						writeOdd(t, u, data[i])
						if u.Size() != int64(len(data[i])) {
							t.Errorf("Size = %d, want %d", u.Size(), len(data[i]))
						}
						if err := u.Close(); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				for i := range sinks {
					enc := sinks[i].Bytes()
					if got := decode(t, enc, c, ids); !bytes.Equal(got, data[i]) {
						t.Fatalf("unit %d decodes to %d bytes, not the %d written in order", i, len(got), len(data[i]))
					}
					if c != codec.None && len(enc) >= len(data[i]) {
						t.Errorf("unit %d: %d bytes compressed to %d", i, len(data[i]), len(enc))
					}
					if !encrypt && c == codec.None && !bytes.Equal(enc, data[i]) {
						t.Errorf("unit %d: neither compressed nor encrypted, yet its bytes changed", i)
					}
				}
			})
		}
	}
}

// TestUncompressedUnit: a unit started without compression on a compressing encoder
// passes its bytes as they are.
func TestUncompressedUnit(t *testing.T) {
	o := Options{Compression: codec.Zstd, BlockSize: testBlock, OpenFiles: 1}
	o.MaxMemory = o.MinMemory()
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	var sink bytes.Buffer
	u, err := e.Start("raw", &sink, false)
	if err != nil {
		t.Fatal(err)
	}
	data := testData(3*testBlock+5, 9)
	writeOdd(t, u, data)
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.Bytes(), data) {
		t.Fatal("an uncompressed unit's bytes changed")
	}
}

// orderCompressor copies each block, but holds the first block it is given until a
// later one has been compressed: the workers finish out of order.
type orderCompressor struct {
	first     sync.Once
	laterDone chan struct{}
	once      sync.Once
	calls     atomic.Int32
}

func (c *orderCompressor) Compress(dst, src []byte) ([]byte, error) {
	isFirst := false
	c.first.Do(func() { isFirst = true })
	if isFirst {
		<-c.laterDone
	} else {
		defer c.once.Do(func() { close(c.laterDone) })
	}
	c.calls.Add(1)
	return append(dst[:0], src...), nil
}

// TestOrderWhenWorkersFinishOutOfOrder: the unit's first block is compressed last, yet
// the sink receives the blocks in the order they were written.
func TestOrderWhenWorkersFinishOutOfOrder(t *testing.T) {
	o := Options{Compression: codec.Zstd, Workers: 2, BlockSize: testBlock, OpenFiles: 1}
	o.MaxMemory = o.MinMemory()
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	comp := &orderCompressor{laterDone: make(chan struct{})}
	e.comp = comp
	var sink bytes.Buffer
	u, err := e.Start("db/t.ibd", &sink, true)
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for i := range 6 {
		data = append(data, bytes.Repeat([]byte{byte('a' + i)}, testBlock)...)
	}
	if _, err := u.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if comp.calls.Load() != 6 {
		t.Fatalf("%d blocks compressed, want 6", comp.calls.Load())
	}
	if !bytes.Equal(sink.Bytes(), data) {
		t.Fatalf("the sink got the blocks out of order: %q...", firstBytes(sink.Bytes()))
	}
}

// firstBytes is the first byte of each block of b.
func firstBytes(b []byte) string {
	var s strings.Builder
	for i := 0; i < len(b); i += testBlock {
		s.WriteByte(b[i])
	}
	return s.String()
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("link down") }

// TestSinkErrorStopsEverything: a sink's failure is the unit's error, named after the
// unit, and the whole encoder's: later units refuse to start and other units' writes
// fail with it.
func TestSinkErrorStopsEverything(t *testing.T) {
	for _, c := range []codec.Compression{codec.None, codec.Zstd} {
		t.Run(string(c), func(t *testing.T) {
			o := Options{Compression: c, Workers: 2, BlockSize: testBlock, OpenFiles: 2}
			o.MaxMemory = o.MinMemory()
			e, err := NewEncoder(o)
			if err != nil {
				t.Fatal(err)
			}
			var other bytes.Buffer
			ok, err := e.Start("db/ok.ibd", &other, true)
			if err != nil {
				t.Fatal(err)
			}
			bad, err := e.Start("db/bad.ibd", failingWriter{}, true)
			if err != nil {
				t.Fatal(err)
			}
			bad.Write(testData(2*testBlock, 1))
			err = bad.Close()
			if err == nil || !strings.Contains(err.Error(), "db/bad.ibd") || !strings.Contains(err.Error(), "link down") {
				t.Fatalf("Close of the unit whose sink fails = %v, want its name and the sink's error", err)
			}
			if !errors.Is(e.Err(), err) && e.Err().Error() != err.Error() {
				t.Errorf("Err = %v, want the unit's error %v", e.Err(), err)
			}
			if _, serr := e.Start("db/later.ibd", &other, true); serr == nil {
				t.Error("Start after a failure succeeded")
			}
			_, werr := ok.Write(testData(2*testBlock, 2))
			if cerr := ok.Close(); werr == nil && cerr == nil {
				t.Error("another unit wrote and closed without error after the encoder failed")
			}
			if cerr := e.Close(); cerr == nil || !strings.Contains(cerr.Error(), "link down") {
				t.Errorf("encoder Close = %v, want the sink's error", cerr)
			}
		})
	}
}

// errCompressor fails every block.
type errCompressor struct{}

func (errCompressor) Compress([]byte, []byte) ([]byte, error) {
	return nil, errors.New("compressor broke")
}

// TestCompressorError: a block the compressor fails is the unit's error, and nothing
// of it reaches the sink.
func TestCompressorError(t *testing.T) {
	o := Options{Compression: codec.Zstd, BlockSize: testBlock, OpenFiles: 1}
	o.MaxMemory = o.MinMemory()
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	e.comp = errCompressor{}
	var sink bytes.Buffer
	u, err := e.Start("db/t.ibd", &sink, true)
	if err != nil {
		t.Fatal(err)
	}
	u.Write([]byte("some bytes"))
	if err := u.Close(); err == nil || !strings.Contains(err.Error(), "compressor broke") {
		t.Fatalf("Close = %v, want the compressor's error", err)
	}
	if sink.Len() != 0 {
		t.Errorf("%d bytes reached the sink after the compressor failed", sink.Len())
	}
	e.Close()
}

// TestFailStopsWriters: Fail (a job cancelled from outside) makes the next block's
// write and every Start return that error.
func TestFailStopsWriters(t *testing.T) {
	o := Options{Compression: codec.LZ4, BlockSize: testBlock, OpenFiles: 1}
	o.MaxMemory = o.MinMemory()
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	u, err := e.Start("db/t.ibd", io.Discard, true)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := errors.New("cancelled")
	if got := e.Fail(cancelled); got != cancelled {
		t.Fatalf("Fail = %v, want %v", got, cancelled)
	}
	if got := e.Fail(errors.New("later")); got != cancelled {
		t.Errorf("a second Fail = %v: the first error must stay", got)
	}
	if _, err := u.Write(make([]byte, testBlock)); !errors.Is(err, cancelled) {
		t.Errorf("Write of a whole block after Fail = %v, want %v", err, cancelled)
	}
	if _, err := e.Start("db/u.ibd", io.Discard, true); !errors.Is(err, cancelled) {
		t.Errorf("Start after Fail = %v, want %v", err, cancelled)
	}
	u.Close()
	if err := e.Close(); !errors.Is(err, cancelled) {
		t.Errorf("Close = %v, want %v", err, cancelled)
	}
}

// gatedSink blocks every write until open is closed.
type gatedSink struct {
	open chan struct{}
	buf  bytes.Buffer
}

func (g *gatedSink) Write(p []byte) (int, error) {
	<-g.open
	return g.buf.Write(p)
}

// TestMemoryBound: with every unit's sink stalled, the writers are held once the
// blocks of the budget are in use: the bytes the units accept together stay within the
// budget's blocks (more than one unit's queue holds, so the budget is what binds), and
// everything arrives, in order, once the sinks move.
func TestMemoryBound(t *testing.T) {
	const units = 3
	o := Options{Compression: codec.Zstd, Workers: 2, BlockSize: testBlock, OpenFiles: units}
	o.MaxMemory = o.MinMemory()
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	blocks := int64(o.MaxMemory / (2 * testBlock))
	open := make(chan struct{})
	var accepted atomic.Int64
	var sinks [units]*gatedSink
	var data [units][]byte
	done := make(chan error, units)
	for i := range units {
		sinks[i] = &gatedSink{open: open}
		data[i] = testData(int(blocks)*testBlock, int64(i))
		u, err := e.Start(fmt.Sprintf("db/t%d.ibd", i), sinks[i], true)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for p := data[i]; len(p) > 0; p = p[testBlock:] {
				if _, err := u.Write(p[:testBlock]); err != nil {
					done <- err
					return
				}
				accepted.Add(testBlock)
			}
			done <- u.Close()
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for len(e.tokens) > 0 { // until every block of the budget is taken
		if time.Now().After(deadline) {
			t.Fatalf("the writers never took the budget's %d blocks (%d bytes accepted)", blocks, accepted.Load())
		}
		time.Sleep(time.Millisecond)
	}
	for range 20 { // the writers stay held while the sinks do not move
		if a := accepted.Load(); a > blocks*testBlock {
			t.Fatalf("%d bytes accepted with the sinks stalled: more than the budget's %d blocks of %d", a, blocks, testBlock)
		}
		time.Sleep(time.Millisecond)
	}
	close(open)
	for range units {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range units {
		if got := decode(t, sinks[i].buf.Bytes(), codec.Zstd, nil); !bytes.Equal(got, data[i]) {
			t.Fatalf("unit %d: its bytes did not arrive whole and in order after the stall", i)
		}
	}
}

// TestMemoryCheck: a budget too small for the open files and workers is refused with
// what to allow.
func TestMemoryCheck(t *testing.T) {
	o := Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 4}
	o.MaxMemory = o.MinMemory() - 1
	if _, err := NewEncoder(o); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Fatalf("NewEncoder with %d bytes = %v, want too small", o.MaxMemory, err)
	}
	o.MaxMemory++
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatalf("NewEncoder at MinMemory: %v", err)
	}
	if e.Options().BlockSize != DefaultBlockSize || e.Options().Workers != 2 {
		t.Errorf("options with defaults: %+v", e.Options())
	}
	e.Close()
}
