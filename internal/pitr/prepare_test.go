package pitr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/storage"
)

// TestPrepareReplacesAndRemovesRelayLogs: what a killed restore left in the datadir's
// relay directory is removed before planning, and a plan that fails leaves no relay
// directory behind.
func TestPrepareReplacesAndRemovesRelayLogs(t *testing.T) {
	ctx := context.Background()
	st, err := storage.Open(ctx, storage.Config{URL: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Init(ctx, st, "test")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := binlog.Open(st, binlog.Options{})
	datadir := filepath.Join(t.TempDir(), "new", "mysql")
	relay := restore.StagingPath(datadir, "relay")
	if err := os.MkdirAll(relay, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(relay, "relay.000001"), []byte("left by a killed restore"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Prepare(ctx, r, a, "", binlog.Target{Time: time.Now()}, datadir)
	if !errors.Is(err, ErrNoBackup) {
		t.Fatalf("an empty repository: %v", err)
	}
	if _, err := os.Stat(relay); !os.IsNotExist(err) {
		t.Fatalf("the relay directory is still there: %v", err)
	}
}
