package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
)

// smallFiles is a backup of n small files, which the repository packs into few objects.
func smallFiles(n int) map[string][]byte {
	files := map[string][]byte{}
	for i := range n {
		files[fmt.Sprintf("db%d/t%d.ibd", i%3, i)] = []byte(fmt.Sprintf("%0*d", 3000+i, i))
	}
	return files
}

// TestSmallBlobsOfOneObjectOverlap: the blobs of one object are passed to fn by several
// decoders at once, so that a restore of many small files packed into one object does
// not write them one after another (a 20,000-table restore waited on each small write
// in turn). Each object is still read once, and every blob arrives whole.
func TestSmallBlobsOfOneObjectOverlap(t *testing.T) {
	st := &countGets{Storage: newFS(t), gets: map[string]int{}}
	r, _ := Init(context.Background(), st, "test")
	files := smallFiles(200)
	m := writeBackup(t, r, "s1", files, WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8}})
	if len(m.Objects) > 2 {
		t.Fatalf("the 200 small files are in %d objects; the test needs them packed", len(m.Objects))
	}
	st.gets = map[string]int{}
	var mu sync.Mutex
	inFlight, most, got := 0, 0, map[string][]byte{}
	err := r.ReadBackup(context.Background(), m, ReadOptions{Parallel: 4}, func(f *manifest.File, _ *manifest.Blob, rd io.Reader) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // a write that waits on the disk
		b, err := io.ReadAll(rd)
		mu.Lock()
		inFlight--
		got[f.Path] = b
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if most < 2 {
		t.Errorf("at most %d blob of one object was passed on at once; want several", most)
	}
	for key, n := range st.gets {
		if n != 1 {
			t.Errorf("object %s read %d times; want once", key, n)
		}
	}
	for path, want := range files {
		if string(got[path]) != string(want) {
			t.Errorf("%s: %d bytes back, want %d", path, len(got[path]), len(want))
		}
	}
}

// TestBlobErrorStopsTheRead: an error of fn on one blob while others are decoded is the
// error ReadBackup returns, and nothing is left running.
func TestBlobErrorStopsTheRead(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	m := writeBackup(t, r, "s1", smallFiles(100), WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8}})
	full := errors.New("disk full")
	var mu sync.Mutex
	calls := 0
	// Later blobs wait for the failing one, so that a scheduler pausing it (a loaded
	// machine) cannot let every other blob through first.
	failed := make(chan struct{})
	err := r.ReadBackup(context.Background(), m, ReadOptions{Parallel: 4}, func(f *manifest.File, _ *manifest.Blob, rd io.Reader) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch {
		case n == 10:
			close(failed)
			return full
		case n > 10:
			<-failed
		}
		_, err := io.Copy(io.Discard, rd)
		return err
	})
	if !errors.Is(err, full) {
		t.Fatalf("ReadBackup returned %v; want the blob's error", err)
	}
	if calls >= 50 {
		t.Errorf("fn was called %d times; want the read stopped soon after the 10th failed", calls)
	}
}

// TestLatestReadsOnlyTheNewestManifests: "latest" is the newest complete backup (an
// unfinished newer one is passed over, two started in the same second are told apart
// as List orders them), and resolving it reads the manifests of the newest backups
// only, not every backup's (a manifest of 100,000 tables takes seconds to read).
func TestLatestReadsOnlyTheNewestManifests(t *testing.T) {
	st := &countGets{Storage: newFS(t), gets: map[string]int{}}
	r, _ := Init(context.Background(), st, "test")
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8}}
	files := map[string][]byte{"a": []byte("aaa")}
	for _, id := range []string{"20260101t000000z-a", "20260102t000000z-b", "20260103t000000z-c", "20260103t000000z-b"} {
		writeBackup(t, r, id, files, o)
		time.Sleep(time.Millisecond) // start times in this order
	}
	w, err := r.NewBackup(context.Background(), "20260104t000000z-d", o)
	if err != nil {
		t.Fatal(err)
	}
	w.Abort(errors.New("killed"))
	st.gets = map[string]int{}
	m, err := r.Resolve(context.Background(), "latest")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for key, n := range st.gets {
		if strings.HasSuffix(key, manifestName) {
			read += n
		}
	}
	list, _ := r.List(context.Background())
	if want := list[len(list)-2].ID; m.ID != want || !strings.HasPrefix(m.ID, "20260103") {
		t.Errorf("latest is %s; List's newest complete backup is %s", m.ID, want)
	}
	if read > 3 { // the unfinished backup's, then the two of the second before it
		t.Errorf("resolving latest read %d manifests; want 3: the newest seconds' only", read)
	}
}
