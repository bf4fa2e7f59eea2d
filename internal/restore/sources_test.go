package restore_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/restore/sourcetest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/stream"
)

// TestSources runs the source contract on every end a backup is restored from, each
// backup written through the end's sink.
func TestSources(t *testing.T) {
	t.Run("Dir", func(t *testing.T) { sourcetest.Run(t, dirSource) })
	t.Run("Stream", func(t *testing.T) { sourcetest.Run(t, streamSource) })
	t.Run("Repo", func(t *testing.T) { sourcetest.Run(t, repoSource) })
}

func dirSource(t *testing.T, files map[string][]byte, damaged bool) restore.Source {
	dir := filepath.Join(t.TempDir(), "backup")
	s, err := sink.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sourcetest.Write(t, s, files, damaged)
	return &restore.DirSource{Dir: dir, Parallel: 2}
}

func streamSource(t *testing.T, files map[string][]byte, damaged bool) restore.Source {
	var buf bytes.Buffer
	s, err := stream.NewSink(&buf, stream.Options{Compression: codec.None, Workers: 1, MaxMemory: 32 << 20, BlockSize: 1 << 20, OpenFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	sourcetest.Write(t, s, files, damaged)
	return stream.NewSource(bytes.NewReader(buf.Bytes()), "test stream", nil, 32<<20)
}

func repoSource(t *testing.T, files map[string][]byte, damaged bool) restore.Source {
	ctx := context.Background()
	st, err := storage.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Init(ctx, st, "test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := repo.NewSink(r, repo.WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 1, OpenFiles: 2}, MaxMemory: 64 << 20, PartSize: 1 << 20, Uploads: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := sourcetest.Write(t, s, files, damaged)
	return &repo.Source{Repo: r, BackupID: m.ID, Parallel: 2}
}
