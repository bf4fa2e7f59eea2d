package repo

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
)

// TestMoreOpenFilesThanOpenFiles: a backup with far more files written at once than
// its OpenFiles, each left with a partial block between writes, finishes and
// round-trips. The encoder's pool used to end up all partial blocks of idle parts, with
// every writer waiting for a block.
func TestMoreOpenFilesThanOpenFiles(t *testing.T) {
	r, err := Init(context.Background(), newFS(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20}
	w, err := r.NewBackup(context.Background(), "many", o)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Format: 1, Type: "full", Storage: manifest.Storage{Format: "repository",
		Compression: string(codec.Zstd), PartSize: o.PartSize}, EndTime: time.Now()}
	roundTripWithin(t, r, w, m, "writing more files at once than OpenFiles hangs: the encoder's block pool deadlocked",
		func(want map[string][]byte) error { return writeInTurns(w, m, want, 30) })
}

// writeInTurns creates n files and writes 300 KiB to each in turns of 100 KiB, so that
// every file holds a partial block between its writes, then closes them.
func writeInTurns(w *Writer, m *manifest.Manifest, want map[string][]byte, n int) error {
	files := make([]*File, n)
	for i := range files {
		f, err := w.Create(fmt.Sprintf("db/t%02d.ibd", i))
		if err != nil {
			return err
		}
		files[i] = f
	}
	for turn := range 3 {
		for i, f := range files {
			p := bytes.Repeat([]byte{byte(i), byte(turn), 7}, 100<<10/3)
			if err := f.WriteAt(p, int64(len(want[f.rel]))); err != nil {
				return err
			}
			want[f.rel] = append(want[f.rel], p...)
		}
	}
	for _, f := range files {
		b := want[f.rel]
		if err := f.Close(int64(len(b))); err != nil {
			return err
		}
		m.Files = append(m.Files, manifest.File{Path: f.rel, Size: int64(len(b)), CRC32C: checksum.Hex(checksum.Sum(b))})
	}
	return nil
}

// TestIdlePartsDoNotPinTheBudget: parts left open between writes (a file's last range
// waits for its Close while another range is copied) hold more of the part budget than
// there is; a writer that needs memory must not wait for them forever.
func TestIdlePartsDoNotPinTheBudget(t *testing.T) {
	r, err := Init(context.Background(), newFS(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 8}, PartSize: 1 << 20, Uploads: 1}
	o.MaxMemory = o.withDefaults().Pipeline.MaxMemory + 3*o.PartSize
	w, err := r.NewBackup(context.Background(), "idle", o)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Format: 1, Type: "full", Storage: manifest.Storage{Format: "repository", PartSize: o.PartSize}, EndTime: time.Now()}
	roundTripWithin(t, r, w, m, "idle parts pinned the whole part budget: a writer waits forever",
		func(want map[string][]byte) error { return writeIdleParts(w, m, want, 5) })
}

// roundTripWithin runs write (which records what it wrote in want) and fails with hung
// if it takes over 10 s; then commits m and checks every file reads back as written.
func roundTripWithin(t *testing.T, r *Repo, w *Writer, m *manifest.Manifest, hung string, write func(want map[string][]byte) error) {
	t.Helper()
	want := map[string][]byte{}
	done := make(chan error, 1)
	go func() { done <- write(want) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(hung)
	}
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range want {
		if !bytes.Equal(got[p], b) {
			t.Errorf("%s differs after the round trip", p)
		}
	}
}

// writeIdleParts writes, for each of n files, the tail range first (left open, as the
// engine's last segment is), then the head range, then closes them all.
func writeIdleParts(w *Writer, m *manifest.Manifest, want map[string][]byte, n int) error {
	const half = 900 << 10
	files := make([]*File, n)
	for i := range files {
		f, err := w.Create(fmt.Sprintf("db/t%02d.ibd", i))
		if err != nil {
			return err
		}
		files[i] = f
		want[f.rel] = bytes.Repeat([]byte{byte(i), 3, 5, 7}, 2*half/4)
		if err := f.WriteAt(want[f.rel][half:], half); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := f.WriteAt(want[f.rel][:half], 0); err != nil {
			return err
		}
		b := want[f.rel]
		if err := f.Close(int64(len(b))); err != nil {
			return err
		}
		m.Files = append(m.Files, manifest.File{Path: f.rel, Size: int64(len(b)), CRC32C: checksum.Hex(checksum.Sum(b))})
	}
	return nil
}
