package verify

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// pages reads pages 0..3 of a tablespace written by MariaDB 10.11 (the innodb
// package's fixtures, made by its testdata/gen.sh).
func pages(t *testing.T, name string) []byte { return testdb.PageFixture(t, name+".after.gz") }

// store writes data as db/t.ibd of a repository backup whose manifest describes the
// tablespace from its page 0, as the copy does.
func store(t *testing.T, r *repo.Repo, id string, data []byte) {
	t.Helper()
	h, err := innodb.ParseSpaceHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.NewBackup(context.Background(), id, repo.WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := w.Create("db/t.ibd")
	if err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Format: 1, Storage: manifest.Storage{Format: "repository", Compression: "zstd"},
		Files: []manifest.File{{Path: "db/t.ibd", Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data)),
			Kind: manifest.KindInnoDB, Space: &manifest.Space{ID: h.SpaceID, Flags: uint32(h.Flags), Crypt: h.CryptData}}}}
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestPagesAreValidated: the pages of a real tablespace pass; the same file with one
// page damaged before it was stored (every checksum of the repository matches: only
// the page check can tell) fails, naming the file and the page.
func TestPagesAreValidated(t *testing.T) {
	st, err := storage.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Init(context.Background(), st, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fcrc32", "crc32"} {
		good := pages(t, name)
		bad := append([]byte(nil), good...)
		ps := len(good) / 4
		bad[2*ps+ps/2] ^= 0x40 // page 2, in the middle
		store(t, r, name+"-good", good)
		store(t, r, name+"-bad", bad)
		cfg := Config{Repo: r, Log: slog.New(slog.DiscardHandler), Progress: io.Discard}
		cfg.BackupID = name + "-good"
		rep, err := Run(context.Background(), cfg)
		if err != nil || rep.Pages != 4 {
			t.Fatalf("%s: intact pages: %v, %+v; want 4 pages valid", name, err, rep)
		}
		cfg.BackupID = name + "-bad"
		_, err = Run(context.Background(), cfg)
		t.Logf("%s: %v", name, err)
		if err == nil || !strings.Contains(err.Error(), "damaged: db/t.ibd: page 2 is not valid") {
			t.Fatalf("%s: a damaged page passed verification or was not named: %v", name, err)
		}
	}
}
