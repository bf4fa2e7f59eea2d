package repo

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/signing"
	"github.com/ferry-backup/ferry/internal/storage"
)

// interruptedBackup writes the first 3 MiB of a 4 MiB tablespace (three parts) and a
// small one (packed) as backup "r1", waits for the uploads and stops as a killed
// ferry would: no manifest.
func interruptedBackup(t *testing.T, r *Repo, o WriterOptions, big, small []byte, space *manifest.Space) {
	t.Helper()
	w, err := r.NewBackup(context.Background(), "r1", o)
	if err != nil {
		t.Fatal(err)
	}
	w.SetSince(100)
	f, _ := w.CreateSpace("db/t.ibd", space, false)
	if err := f.WriteAt(big[:3<<20], 0); err != nil {
		t.Fatal(err)
	}
	s, _ := w.CreateSpace("db/s.ibd", &manifest.Space{ID: 9, Identity: &manifest.Identity{Inode: 9}}, false)
	if err := s.WriteAt(small, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(int64(len(small))); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	pt := f.open[3<<20]
	delete(f.open, 3<<20)
	f.mu.Unlock()
	if err := pt.seal(); err != nil {
		t.Fatal(err)
	}
	w.flushPack()
	if err := w.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Abort(errors.New("killed"))
}

// countBytes counts the bytes read.
type countBytes struct {
	storage.Storage
	n atomic.Int64
}

func (c *countBytes) Get(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	return c.Storage.Get(ctx, key, off, n, func(rd io.Reader) error {
		return fn(io.TeeReader(rd, countWriter{&c.n}))
	})
}

type countWriter struct{ n *atomic.Int64 }

func (c countWriter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// TestResumeKeepsHeldRanges: a backup interrupted after uploading parts of a
// tablespace is resumed: every object it stored is kept in the backup (found through
// the index trailers alone when not signing; read whole for their SHA-256 when
// signing), Held offers the stored ranges for the same file only, a resumed file
// starts with them, and the backup read back equals the source with the patch of a
// changed page applied. Another encoding is refused.
func TestResumeKeepsHeldRanges(t *testing.T) {
	for _, signed := range []bool{false, true} {
		ctx := context.Background()
		st := &countBytes{Storage: newFS(t)}
		r, _ := Init(ctx, st, "test")
		o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8}, PartSize: 1 << 20}
		var pub ed25519.PublicKey
		if signed {
			sec, pubText, err := signing.NewKey()
			if err != nil {
				t.Fatal(err)
			}
			key := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(key, []byte(sec+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if o.SignWith, err = signing.LoadSecret(key); err != nil {
				t.Fatal(err)
			}
			if pub, err = signing.ParsePublic(pubText); err != nil {
				t.Fatal(err)
			}
		}
		big := append([]byte(nil), testFiles()["db/noise.ibd"][:4<<20]...)
		small := bytes.Repeat([]byte("small"), 4096)
		space := &manifest.Space{ID: 5, Flags: 21, Identity: &manifest.Identity{Inode: 77, BirthNS: 1}}
		interruptedBackup(t, r, o, big, small, space)

		e, err := r.Interrupted(ctx)
		if err != nil || e.ID != "r1" {
			t.Fatalf("Interrupted = %q, %v", e.ID, err)
		}
		lz4 := o
		lz4.Pipeline.Compression = codec.LZ4
		if _, err := r.ResumeBackup(ctx, e, lz4); err == nil {
			t.Fatal("a resume with another compression was accepted")
		}
		st.n.Store(0)
		w, err := r.ResumeBackup(ctx, e, o)
		if err != nil {
			t.Fatal(err)
		}
		k := w.Kept()
		if k.Objects != 4 { // three parts and the pack
			t.Fatalf("kept %d objects, want 4", k.Objects)
		}
		if read := st.n.Load(); !signed && read > 4*(64<<10) || signed && read != k.Bytes {
			t.Errorf("resuming read %d bytes of the %d stored (signed: %v)", read, k.Bytes, signed)
		}
		other := *space
		other.Identity = &manifest.Identity{Inode: 78, BirthNS: 1}
		if h := w.Held("db/t.ibd", &other); h != nil {
			t.Fatalf("Held offered ranges of another file: %+v", h)
		}
		held := w.Held("db/t.ibd", space)
		var n int64
		for _, h := range held {
			if h.Since != 100 || h.CRC != checksum.Sum(big[h.Off:h.Off+h.Len]) {
				t.Fatalf("held range %+v: wrong since or CRC", h)
			}
			n += h.Len
		}
		if n != 3<<20 {
			t.Fatalf("held %d bytes of t.ibd, want 3 MiB", n)
		}
		w.SetSince(200)
		f, _ := w.CreateSpace("db/t.ibd", space, true)
		if err := f.WriteAt(big[3<<20:], 3<<20); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(int64(len(big))); err != nil {
			t.Fatal(err)
		}
		final := append([]byte(nil), big...)
		changed := bytes.Repeat([]byte{'P'}, 16<<10)
		copy(final[1<<20:], changed)
		if err := w.Patch(1, "db/t.ibd", 1<<20, changed); err != nil {
			t.Fatal(err)
		}
		s, _ := w.CreateSpace("db/s.ibd", &manifest.Space{ID: 9, Identity: &manifest.Identity{Inode: 9}}, false)
		if err := s.WriteAt(small, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(int64(len(small))); err != nil {
			t.Fatal(err)
		}
		m := &manifest.Manifest{Format: 1, Type: "full", Storage: manifest.Storage{Format: "repository", Compression: "zstd", PartSize: 1 << 20},
			Files: []manifest.File{
				{Path: "db/s.ibd", Size: int64(len(small)), CRC32C: checksum.Hex(checksum.Sum(small))},
				{Path: "db/t.ibd", Size: int64(len(big)), CRC32C: checksum.Hex(checksum.Sum(big))},
			}}
		if err := w.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := Validate(m); err != nil {
			t.Fatal(err)
		}
		if len(m.Objects) < k.Objects+2 {
			t.Fatalf("the manifest lists %d objects, fewer than the %d kept and the new ones", len(m.Objects), k.Objects)
		}
		if signed {
			r.Trust(pub)
			if _, err := r.Manifest(ctx, "r1"); err != nil {
				t.Fatalf("the resumed signed backup is not trusted: %v", err)
			}
		}
		got := map[string][]byte{"db/s.ibd": make([]byte, len(small)), "db/t.ibd": make([]byte, len(big))}
		for round := 0; round <= 1; round++ {
			err := r.ReadBackup(ctx, m, ReadOptions{Round: round, Parallel: 2}, func(f *manifest.File, b *manifest.Blob, rd io.Reader) error {
				_, err := io.ReadFull(rd, got[f.Path][b.RawOffset:b.RawOffset+b.RawSize])
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got["db/t.ibd"], final) || !bytes.Equal(got["db/s.ibd"], small) {
			t.Fatal("the resumed backup read back differs from the source")
		}
		if _, err := r.Interrupted(ctx); !errors.Is(err, ErrNothingToResume) {
			t.Fatalf("Interrupted after the resumed backup completed: %v, want nothing to resume", err)
		}
	}
}
