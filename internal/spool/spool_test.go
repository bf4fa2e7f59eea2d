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

// slowWriter takes bytes at a bounded rate, as a slow link would.
type slowWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestOrderAcrossTiers: the writer goes on while the reader is slow, bytes pass from
// memory to the file tier and back, and the reader gets every byte in order; the
// writer never waited for the reader (it finished long before the drain).
func TestOrderAcrossTiers(t *testing.T) {
	dir := t.TempDir()
	s := New(Options{Dir: dir, Memory: 64 << 10})
	var want bytes.Buffer
	out := &slowWriter{}
	done := make(chan error, 1)
	go func() { done <- s.Drain(out, 32<<10) }()
	r := rand.New(rand.NewSource(1))
	start := time.Now()
	for i := 0; i < 400; i++ {
		p := make([]byte, 1+r.Intn(20<<10))
		r.Read(p)
		want.Write(p)
		if _, err := s.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	wrote := time.Since(start)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the spool file is visible in %s: %v (it must be unlinked at once)", dir, ents)
	}
	s.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	drained := time.Since(start)
	s.Release()
	if !bytes.Equal(out.buf.Bytes(), want.Bytes()) {
		t.Fatalf("drained %d bytes, not the %d written in order", out.buf.Len(), want.Len())
	}
	if s.Peak() <= 64<<10 {
		t.Errorf("peak %d: the file tier was never used", s.Peak())
	}
	if wrote*2 > drained {
		t.Errorf("writing took %v of the %v the drain took: the writer waited for the reader", wrote, drained)
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
