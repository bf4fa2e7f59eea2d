package restore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
)

// fakeSource writes one file into the staging directory and returns a prepared
// backup (so no mariadbd runs), or fails after writing it.
type fakeSource struct {
	keep    bool
	failErr error
	staging string
}

func (s *fakeSource) Name() string                             { return "fake" }
func (s *fakeSource) Caps() Caps                               { return Caps{Resume: s.keep} }
func (s *fakeSource) Inspect(context.Context) (*Backup, error) { return nil, ErrNoInspect }
func (s *fakeSource) Staging(datadir string) (string, error) {
	dir, err := makeStaging(datadir, "")
	s.staging = dir
	return dir, err
}

func (s *fakeSource) Fill(_ context.Context, staging string, _ Env) (*Backup, error) {
	if err := os.MkdirAll(filepath.Join(staging, "db"), 0o750); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(staging, "db", "t.ibd"), []byte("pages"), 0o640); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(staging, manifest.FileName), []byte("{}"), 0o640); err != nil {
		return nil, err
	}
	if s.failErr != nil {
		return nil, s.failErr
	}
	m := &manifest.Manifest{Coordinates: mariadb.Coordinates{GTIDBinlogPos: "0-1-42"}}
	return &Backup{Dir: staging, Manifest: m, Prepared: true}, nil
}

func restoreWith(t *testing.T, src Source, datadir string) (*Result, error) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := &fakeRecoverer{calls: new([]string)} // no server: the backup is prepared
	return Restore(context.Background(), Config{Source: src, Datadir: datadir, Recoverer: rec, Log: log, Progress: io.Discard})
}

// TestRestoreThroughSource checks the engine's promises through a fake source: the
// datadir appears only whole, without the backup's own files, and a failed fill leaves
// nothing behind unless the source keeps its staging directory for a resume.
func TestRestoreThroughSource(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		datadir := filepath.Join(t.TempDir(), "data")
		src := &fakeSource{}
		res, err := restoreWith(t, src, datadir)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(datadir, "db", "t.ibd")); err != nil || string(b) != "pages" {
			t.Fatalf("restored file: %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(datadir, manifest.FileName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the manifest was left in the datadir: %v", err)
		}
		if _, err := os.Stat(src.staging); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staging %s still exists: %v", src.staging, err)
		}
		if res.Coordinates.GTIDBinlogPos != "0-1-42" {
			t.Errorf("coordinates = %+v", res.Coordinates)
		}
	})
	t.Run("failure removes staging", func(t *testing.T) {
		datadir := filepath.Join(t.TempDir(), "data")
		src := &fakeSource{failErr: errors.New("connection cut")}
		_, err := restoreWith(t, src, datadir)
		if err == nil || !strings.Contains(err.Error(), "connection cut") {
			t.Fatalf("err = %v", err)
		}
		if _, err := os.Stat(src.staging); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staging %s left behind: %v", src.staging, err)
		}
		if _, err := os.Stat(datadir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("datadir created by a failed restore: %v", err)
		}
	})
	t.Run("failure keeps a resumable staging", func(t *testing.T) {
		datadir := filepath.Join(t.TempDir(), "data")
		src := &fakeSource{keep: true, failErr: errors.New("connection cut")}
		_, err := restoreWith(t, src, datadir)
		if err == nil || !strings.Contains(cliText(err), "--resume") || !strings.Contains(err.Error(), src.staging) {
			t.Fatalf("err = %v, want the kept staging and --resume named", err)
		}
		if _, err := os.Stat(filepath.Join(src.staging, "db", "t.ibd")); err != nil {
			t.Errorf("kept staging lost its files: %v", err)
		}
	})
	t.Run("non-empty datadir refused before the source is read", func(t *testing.T) {
		datadir := t.TempDir()
		os.WriteFile(filepath.Join(datadir, "ibdata1"), []byte("x"), 0o640)
		src := &fakeSource{}
		if _, err := restoreWith(t, src, datadir); err == nil || !strings.Contains(cliText(err), "--replace") {
			t.Fatalf("err = %v", err)
		}
		if src.staging != "" {
			t.Errorf("staging %s created for a refused restore", src.staging)
		}
	})
}

// TestApplyMemory: --use-memory sizes the native apply's batches as it sizes the
// server's buffer pool, and a value that is not a size is refused in one line.
func TestApplyMemory(t *testing.T) {
	for in, want := range map[string]int{"": 0, "256M": 256 << 20, "2G": 2 << 30, "1048576": 1 << 20} {
		if got, err := applyMemory(in); err != nil || got != want {
			t.Errorf("applyMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"lots", "-1G", "512K", "2T", "1.5G"} {
		if _, err := applyMemory(in); err == nil || !strings.Contains(cliText(err), "--use-memory") {
			t.Errorf("applyMemory(%q): %v, want a refusal naming --use-memory", in, err)
		}
	}
}
