package stream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/sink"
)

// heapInUse is the live heap after two full collections (the second empties the
// sync.Pools the codecs keep their buffers in).
func heapInUse() int64 {
	runtime.GC()
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
	// Files smaller than half a block are gathered before they are framed. The block
	// pool is small, so that its buffers, allocated as the load needs them, weigh
	// little against the files counted.
	const warm, files, size, block, perFileBound = 500, 2000, 24 << 10, 64 << 10, 2 << 10
	data := bytes.Repeat([]byte("ferry stream "), size/13+1)[:size]
	id, _ := keys(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			o := Options{Compression: m.comp, Workers: 2, BlockSize: block, OpenFiles: 4}
			if m.enc {
				o.Recipients = id
			}
			o.MaxMemory = o.MinMemory()
			s, err := NewSink(io.Discard, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Open(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			kept := make([]sink.File, 0, warm+files)
			var before int64
			for i := range warm + files {
				if i == warm { // the first files warm the block pool up
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

// slowFollower counts the files being written at once; each write takes a while, as
// on a busy disk.
type slowFollower struct {
	mu       sync.Mutex
	now, max int
}

func (s *slowFollower) Wrote(int64, int64) { time.Sleep(2 * time.Millisecond) }
func (s *slowFollower) Complete(int64)     { s.done() }
func (s *slowFollower) Fail(error)         { s.done() }

func (s *slowFollower) start() Follower {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now++
	s.max = max(s.max, s.now)
	return s
}

func (s *slowFollower) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now--
}

// TestUnpackMemoryPerFileIsSmall: a stream of many small files, each ended in the
// stream long before its writer is done, as when the disk is slower than the stream.
// The files being written at once stay within the budget's open-file limit, and the
// bytes allocated per file are about its payload, not a new 1 MiB copy buffer: the
// unpacker started a writer per file as soon as the stream named it, so a restore of
// 20,000 tables held hundreds of them (650 MB RSS for a 256 MiB budget).
func TestUnpackMemoryPerFileIsSmall(t *testing.T) {
	const files, size, budget = 400, 32 << 10, 16 << 20
	data := bytes.Repeat([]byte("ferry unpack "), size/13+1)[:size]
	var out bytes.Buffer
	w, err := NewWriter(&out, Options{Compression: codec.None, Workers: 1, MaxMemory: 16 << 20, OpenFiles: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		f, err := w.Create(fmt.Sprintf("db/t%d.ibd", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var fw slowFollower
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := Unpack(context.Background(), bytes.NewReader(out.Bytes()), t.TempDir(), UnpackOptions{MaxMemory: budget,
		Follow: func(string) Follower { return fw.start() }})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != files {
		t.Fatalf("%d files unpacked, want %d", len(res.Files), files)
	}
	if limit := OpenLimit(budget); fw.max > limit {
		t.Fatalf("%d files written at once, more than the %d a %d MiB budget allows: writers pile up behind the stream", fw.max, limit, budget>>20)
	}
	per := int64(after.TotalAlloc-before.TotalAlloc) / files
	t.Logf("at most %d files written at once; %d bytes allocated per %d KiB file", fw.max, per, size>>10)
	if per > 4*size {
		t.Fatalf("%d bytes allocated per %d KiB file: each file allocates more than its payload", per, size>>10)
	}
}
