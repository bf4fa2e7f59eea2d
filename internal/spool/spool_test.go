package spool

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"
)

// gatedWriter holds its first Write until open is closed, as a stalled link would;
// entered is closed when that first Write arrives.
type gatedWriter struct {
	entered, open chan struct{}
	once          sync.Once
	mu            sync.Mutex
	buf           bytes.Buffer
}

func newGatedWriter() *gatedWriter {
	return &gatedWriter{entered: make(chan struct{}), open: make(chan struct{})}
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() {
		close(w.entered)
		<-w.open
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestOrderAcrossTiers: the writer goes on while the reader is stalled (its first
// Write blocked), bytes pass from memory to the file tier, and once the reader moves
// again, while the writer goes on, it gets every byte in order. The writer never waits
// for the reader: all its writes complete while the reader is stalled.
func TestOrderAcrossTiers(t *testing.T) {
	dir := t.TempDir()
	const memory = 64 << 10
	s := New(Options{Dir: dir, Memory: memory})
	var want bytes.Buffer
	out := newGatedWriter()
	done := make(chan error, 1)
	go func() { done <- s.Drain(out, 32<<10) }()
	r := rand.New(rand.NewSource(1))
	write := func(n int) {
		for range n {
			p := make([]byte, 1+r.Intn(20<<10))
			r.Read(p)
			want.Write(p)
			if _, err := s.Write(p); err != nil {
				t.Error(err)
				return
			}
		}
	}
	write(1)
	<-out.entered // the reader holds the first chunk and is stalled
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		write(400)
	}()
	select {
	case <-wrote:
	case <-time.After(time.Minute):
		t.Fatal("the writer waited for the stalled reader")
	}
	if t.Failed() {
		return
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the spool file is visible in %s: %v (it must be unlinked at once)", dir, ents)
	}
	if h := s.Held(); h <= memory || h > int64(want.Len()) {
		t.Errorf("held %d of %d bytes written while the reader stalled: want more than the %d of memory (the file tier)", h, want.Len(), memory)
	}
	close(out.open)
	write(200) // the reader drains the file tier while the writer goes on
	s.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.Release()
	if !bytes.Equal(out.buf.Bytes(), want.Bytes()) {
		t.Fatalf("drained %d bytes, not the %d written in order", out.buf.Len(), want.Len())
	}
	if s.Peak() <= memory {
		t.Errorf("peak %d: the file tier was never used", s.Peak())
	}
	if s.Held() != 0 {
		t.Errorf("held %d after the drain", s.Held())
	}
}

// TestFull: a spool refuses what would exceed its bound, with ErrFull.
func TestFull(t *testing.T) {
	s := New(Options{Dir: t.TempDir(), Memory: 1 << 10, Max: 10 << 10})
	if _, err := s.Write(make([]byte, 8<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, 4<<10)); !errors.Is(err, ErrFull) {
		t.Fatalf("Write beyond the bound = %v, want ErrFull", err)
	}
}

// TestAbort: a failing reader stops the writer, and Abort stops the reader.
func TestAbort(t *testing.T) {
	s := New(Options{Memory: 1 << 20})
	s.Write([]byte("x"))
	err := s.Drain(failing{}, 1024)
	if err == nil {
		t.Fatal("Drain into a failing writer succeeded")
	}
	if _, werr := s.Write([]byte("y")); werr == nil {
		t.Error("Write after the reader failed succeeded")
	}
	s2 := New(Options{Memory: 1 << 20})
	done := make(chan error, 1)
	go func() { done <- s2.Drain(io.Discard, 1024) }()
	s2.Abort(errors.New("stop"))
	if err := <-done; err == nil {
		t.Error("Drain after Abort returned nil")
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("link down") }

// TestDrainNThenDrain: DrainN takes exactly the first n bytes, across memory chunks
// (splitting one) and the file tier, and a later Drain gets the rest in order; asking
// for more than is held fails and takes nothing.
func TestDrainNThenDrain(t *testing.T) {
	s := New(Options{Dir: t.TempDir(), Memory: 40 << 10})
	var want bytes.Buffer
	r := rand.New(rand.NewSource(2))
	for range 30 {
		p := make([]byte, 1+r.Intn(8<<10))
		r.Read(p)
		want.Write(p)
		if _, err := s.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DrainN(io.Discard, int64(want.Len())+1, 4096); err == nil {
		t.Fatal("DrainN of more bytes than held succeeded")
	}
	n := int64(want.Len()) / 3 * 2 // past the memory tier, inside a chunk
	var head, rest bytes.Buffer
	for _, k := range []int64{1, n - 1} { // the first splits a memory chunk
		if err := s.DrainN(&head, k, 4096); err != nil {
			t.Fatal(err)
		}
	}
	if s.Held() != int64(want.Len())-n {
		t.Errorf("after DrainN(%d) the spool holds %d, want %d", n, s.Held(), int64(want.Len())-n)
	}
	s.Close()
	if err := s.Drain(&rest, 4096); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if !bytes.Equal(head.Bytes(), want.Bytes()[:n]) || !bytes.Equal(rest.Bytes(), want.Bytes()[n:]) {
		t.Fatalf("DrainN gave %d bytes and Drain %d: not the %d written, split at %d, in order", head.Len(), rest.Len(), want.Len(), n)
	}
}
