package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty dir: %v, want ErrNotFound", err)
	}
	m := &Manifest{Format: FormatVersion, ID: "x", StartLSN: 1, EndLSN: 9, LastLSN: 9,
		Files: []File{{Path: "db/t.ibd", Size: 16384, CRC32C: "0a0b0c0d", Kind: KindInnoDB, Sparse: true}}}
	if err := Write(dir, m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temporary manifest left behind")
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Files[0] != m.Files[0] || got.EndLSN != 9 || got.TotalSize() != 16384 {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestReadRefusesNewerFormatAndGarbage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileName), []byte(`{"format": 99}`), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "upgrade ferry") {
		t.Fatalf("newer format: %v", err)
	}
	os.WriteFile(filepath.Join(dir, FileName), []byte(`{"format": `), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("garbage: %v", err)
	}
}
