package repo_test

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/sink/sinktest"
	"github.com/ferry-backup/ferry/internal/storage"
)

// repoStored reads a backup back through the repository's reader, as restore does:
// the manifest loaded and validated, the files' blobs and then each round's patches in
// order. A backup without its manifest is not found.
type repoStored struct{ st storage.Storage }

func (s repoStored) Load(ctx context.Context, id string) (*manifest.Manifest, map[string][]byte, error) {
	r, err := repo.Open(ctx, s.st)
	if err != nil {
		return nil, nil, err
	}
	m, err := r.Load(ctx, id, nil)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	files := map[string][]byte{}
	for _, f := range m.Files {
		files[f.Path] = make([]byte, f.Size)
	}
	rounds, _ := repo.Patched(m)
	for round := 0; round <= rounds; round++ {
		err := r.ReadBackup(ctx, m, repo.ReadOptions{Round: round, Parallel: 2}, func(f *manifest.File, b *manifest.Blob, rd io.Reader) error {
			mu.Lock()
			dst := files[f.Path][b.RawOffset : b.RawOffset+b.RawSize]
			mu.Unlock()
			_, err := io.ReadFull(rd, dst)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return m, files, nil
}

// repoEnd returns a factory of repository ends on the storage newStorage makes.
func repoEnd(newStorage func(t *testing.T) storage.Storage) sinktest.Factory {
	return func(t *testing.T) (sink.Sink, sinktest.Stored) {
		st := newStorage(t)
		r, err := repo.Init(context.Background(), st, "sinktest")
		if err != nil {
			t.Fatal(err)
		}
		s, err := repo.NewSink(r, repo.WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8},
			PartSize: 1 << 20, MaxMemory: 64 << 20, Uploads: 2})
		if err != nil {
			t.Fatal(err)
		}
		return s, repoStored{st}
	}
}

// TestRepoConformance runs the Sink suite on a repository in a directory.
func TestRepoConformance(t *testing.T) {
	sinktest.Run(t, repoEnd(func(t *testing.T) storage.Storage {
		st, err := storage.NewFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}))
}
