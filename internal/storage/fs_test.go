package storage_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/storage"
)

// TestFSDeleteSweepsStaleUploads: a killed upload leaves a temporary file that is never
// listed. Deleting the last object of its directory removes the file once it is stale
// (and with it the directory, which would otherwise be listed as a backup for ever),
// but never one an upload may still be writing.
func TestFSDeleteSweepsStaleUploads(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := storage.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string) {
		b := []byte("object " + key)
		if err := s.Put(ctx, key, bytes.NewReader(b), int64(len(b)), checksum.Sum(b)); err != nil {
			t.Fatal(err)
		}
	}
	temp := func(dir string, age time.Duration) string {
		p := filepath.Join(root, dir, ".ferry-tmp-00000003-123")
		if err := os.WriteFile(p, []byte("half an upload"), 0o640); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	put("backups/a/objects/00000001")
	put("backups/b/objects/00000001")
	stale := temp("backups/a/objects", 2*storage.StaleUpload)
	fresh := temp("backups/b/objects", time.Minute)
	for _, id := range []string{"a", "b"} {
		if err := s.Delete(ctx, "backups/"+id+"/objects/00000001"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stale upload's temporary file is left: %v", err)
	}
	if ids, _ := s.Prefixes(ctx, "backups/"); len(ids) != 1 || ids[0] != "b" {
		t.Errorf("backups left: %v, want only b (its upload may still be running)", ids)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a recent upload's temporary file was removed: %v", err)
	}
}
