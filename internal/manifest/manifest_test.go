package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty dir: %v, want ErrNotFound", err)
	}
	m := &Manifest{Format: FormatVersion, ID: "x", StartLSN: 1, EndLSN: 9, LastLSN: 9,
		Files: []File{{Path: "db/t.ibd", Size: 16384, CRC32C: "0a0b0c0d", Kind: KindInnoDB, Sparse: true,
			Space: &Space{ID: 5, Flags: 0x15},
			Blobs: []Blob{{Object: "objects/00000001", Offset: 7, StoredSize: 99, StoredCRC32C: "01020304", RawSize: 16384, CRC32C: "0a0b0c0d"}}}},
		Objects: []Object{{Key: "objects/00000001", Size: 200, CRC32C: "05060708"}}}
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
	if !reflect.DeepEqual(got.Files, m.Files) || got.EndLSN != 9 || got.TotalSize() != 16384 || got.StoredSize() != 200 {
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

// TestValidateServerAddress: the server's host and port, printed into the replica hint
// of a restore, are refused unless a host name (no spaces or control characters, 255
// bytes at most) and a port.
func TestValidateServerAddress(t *testing.T) {
	for _, c := range []struct {
		host string
		port int
		ok   bool
	}{
		{"db1.example", 3306, true},
		{"", 0, true},
		{"db1\n'; DROP", 3306, false},
		{strings.Repeat("a", 256), 3306, false},
		{"db1", 70000, false},
		{"db1", -1, false},
	} {
		m := &Manifest{Server: Server{Host: c.host, Port: c.port}}
		if err := m.Validate(); (err == nil) != c.ok {
			t.Errorf("host %q port %d: %v", c.host, c.port, err)
		}
	}
}
