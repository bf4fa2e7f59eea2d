package spool

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
)

// memFile is a stored file: writes at any offset, in the order they come.
type memFile struct {
	b    []byte
	offs []int64
}

func (m *memFile) WriteAt(p []byte, off int64) error {
	if end := off + int64(len(p)); end > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	copy(m.b[off:], p)
	m.offs = append(m.offs, off)
	return nil
}

// TestFilesReplay: files written concurrently, in pieces and at offsets, come back
// whole and each in the order its writes were made; the spool file leaves nothing in
// its directory.
func TestFilesReplay(t *testing.T) {
	dir := t.TempDir()
	fs := NewFiles(dir, 0)
	r := rand.New(rand.NewSource(1))
	want := map[string][]byte{}
	var files []*File
	for i := range 8 {
		data := make([]byte, 1+r.Intn(300<<10))
		r.Read(data)
		name := string(rune('a' + i))
		want[name] = data
		f, ok := fs.Create(name, int64(len(data)))
		if !ok {
			t.Fatal("an unbounded spool refused a file")
		}
		files = append(files, f)
	}
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := want[f.Name()]
			for off := 0; off < len(data); off += 7000 {
				if err := f.WriteAt(data[off:min(off+7000, len(data))], int64(off)); err != nil {
					t.Error(err)
					return
				}
			}
			f.Close(int64(len(data)))
		}()
	}
	wg.Wait()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the spool left %d files in its directory", len(ents))
	}
	for i, f := range fs.List() {
		if f != files[i] {
			t.Fatal("List is not in creation order")
		}
		var out memFile
		if err := f.CopyTo(&out, make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.b, want[f.Name()]) || f.Size() != int64(len(out.b)) {
			t.Fatalf("%s came back different (%d bytes of %d)", f.Name(), len(out.b), len(want[f.Name()]))
		}
		for k := 1; k < len(out.offs); k++ {
			if out.offs[k] <= out.offs[k-1] {
				t.Fatalf("%s replayed out of order: offset %d after %d", f.Name(), out.offs[k], out.offs[k-1])
			}
		}
	}
	fs.Release()
}

// TestFilesBound: a file that would reserve more than the bound is refused (the caller
// writes it elsewhere), a smaller one still fits, and an open file is not replayed.
func TestFilesBound(t *testing.T) {
	fs := NewFiles(t.TempDir(), 100)
	defer fs.Release()
	a, ok := fs.Create("a", 60)
	if !ok {
		t.Fatal("a file within the bound refused")
	}
	if _, ok := fs.Create("b", 50); ok {
		t.Fatal("a file past the bound kept")
	}
	if _, ok := fs.Create("c", 40); !ok {
		t.Fatal("a file that fits what is left refused")
	}
	if err := a.WriteAt(make([]byte, 80), 0); err != nil { // a file may outgrow its reservation
		t.Fatal(err)
	}
	if err := a.CopyTo(&memFile{}, make([]byte, 16)); !errors.Is(err, ErrOpen) {
		t.Fatalf("an open file was replayed: %v", err)
	}
	if fs.Held() != 80 {
		t.Fatalf("held %d, want 80", fs.Held())
	}
}

// TestFilesGrowthBounded: a file may grow past what it reserved, but never the spool
// past its bound: the write fails and says so.
func TestFilesGrowthBounded(t *testing.T) {
	fs := NewFiles(t.TempDir(), 10)
	defer fs.Release()
	f, ok := fs.Create("aria_log.00000001", 4)
	if !ok {
		t.Fatal("a file within the bound was refused")
	}
	if err := f.WriteAt(make([]byte, 8), 0); err != nil {
		t.Fatalf("growth within the bound refused: %v", err)
	}
	if err := f.WriteAt(make([]byte, 3), 8); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("growth past the bound: %v", err)
	}
}
