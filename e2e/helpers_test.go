package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// backupArgs are the connection arguments for ferry against s.
func backupArgs(s *testdb.Server, target string, extra ...string) []string {
	return append([]string{"backup", "--socket", s.Socket, "--user", "root", "--target-dir", target}, extra...)
}

// readManifest loads a backup's manifest.
func readManifest(t testing.TB, dir string) *manifest.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, manifest.FileName))
	if err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	var m manifest.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("parse manifest: %v", err)
	}
	return &m
}

// shortTemp makes a temp dir with a short path (unix socket paths are limited).
func shortTemp(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "fe2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// compareChecksums fails on any table whose checksum differs or is missing.
func compareChecksums(t testing.TB, want, got map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("no tables to compare")
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("table %s: checksum %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("table %s exists only in the restored copy", k)
		}
	}
}
