package storage_test

import (
	"testing"

	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/storage/storagetest"
)

func TestFSConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		s, err := storage.NewFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
