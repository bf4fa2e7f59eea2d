package stream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/ferry-backup/ferry/internal/sink"
)

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestPackMemoryPerFileIsSmall: a backup engine keeps each file it sent until the whole
// copy is done, as ferry's does. Packing thousands of small files must then cost a few
// hundred bytes of bookkeeping per file, not the file's bytes: the stream's writer kept
// each small file's gathered payload (96 KiB per table), so 20,000 tables held 1.8 GB.
func TestPackMemoryPerFileIsSmall(t *testing.T) {
	const files, size, perFileBound = 1000, 64 << 10, 2 << 10
	data := bytes.Repeat([]byte("ferry stream "), size/13+1)[:size]
	id, _ := keys(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			o := Options{Compression: m.comp, Workers: 2, MaxMemory: 64 << 20, OpenFiles: 4}
			if m.enc {
				o.Recipients = id
			}
			s, err := NewSink(io.Discard, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Open(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			kept := make([]sink.File, 0, 2*files)
			var before int64
			for i := range 2 * files {
				if i == files { // the first files warm the block pool up
					before = heapInUse()
				}
				f, err := s.Create(fmt.Sprintf("db%d/t%d.ibd", i/100, i), sink.FileOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := f.WriteAt(data, 0); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(size); err != nil {
					t.Fatal(err)
				}
				kept = append(kept, f)
			}
			per := (heapInUse() - before) / files
			runtime.KeepAlive(kept)
			if per > perFileBound {
				t.Fatalf("%d bytes of heap per file sent (%d files of %d KiB kept by the engine), want at most %d: the stream keeps what it sent", per, files, size>>10, perFileBound)
			}
			t.Logf("%d bytes of heap per file sent", per)
			if err := s.w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
