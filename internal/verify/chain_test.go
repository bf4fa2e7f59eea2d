package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/storage"
)

// delta makes a one-cluster .delta of pages nos of the tablespace in data, listing
// them as listed.
func delta(data []byte, ps int, nos, listed []uint32) []byte {
	h := make([]byte, ps)
	binary.BigEndian.PutUint32(h, deltaMagicLast)
	for i, n := range listed {
		binary.BigEndian.PutUint32(h[4+4*i:], n)
	}
	binary.BigEndian.PutUint32(h[4+4*len(listed):], deltaListEnd)
	out := h
	for _, n := range nos {
		out = append(out, data[int(n)*ps:int(n+1)*ps]...)
	}
	return out
}

// storeFile commits backup m (its ID, type, LSNs) holding one file of kind kind.
func storeFile(t *testing.T, r *repo.Repo, m *manifest.Manifest, path, kind string, space *manifest.Space, data []byte) {
	t.Helper()
	w, err := r.NewBackup(context.Background(), m.ID, repo.WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := w.Create(path)
	if err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	m.Format, m.Storage = 1, manifest.Storage{Format: "repository", Compression: "zstd"}
	m.Files = []manifest.File{{Path: path, Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data)), Kind: kind, Space: space}}
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestIncrementalVerifiesItsChain: verifying an incremental verifies its base too, and
// the pages inside its deltas at the numbers their headers list; a damaged base, a
// delta listing the wrong pages and a missing base each fail.
func TestIncrementalVerifiesItsChain(t *testing.T) {
	data := pages(t, "fcrc32")
	h, err := innodb.ParseSpaceHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	space := &manifest.Space{ID: h.SpaceID, Flags: uint32(h.Flags)}
	ps := len(data) / 4
	bad := bytes.Clone(data)
	bad[2*ps+ps/2] ^= 0x40
	inc := func(id, base string) *manifest.Manifest {
		return &manifest.Manifest{ID: id, Type: manifest.TypeIncremental, EndLSN: 200,
			Incremental: &manifest.Incremental{BaseID: base, BaseToLSN: 100, FromLSN: 90, Method: "scan"}}
	}
	st, _ := storage.NewFS(t.TempDir())
	r, _ := repo.Init(context.Background(), st, "test")
	storeFile(t, r, &manifest.Manifest{ID: "f-good", Type: manifest.TypeFull, EndLSN: 100}, "db/t.ibd", manifest.KindInnoDB, space, data)
	storeFile(t, r, &manifest.Manifest{ID: "f-bad", Type: manifest.TypeFull, EndLSN: 100}, "db/t.ibd", manifest.KindInnoDB, space, bad)
	good := delta(data, ps, []uint32{1, 2, 3}, []uint32{1, 2, 3})
	storeFile(t, r, inc("i-good", "f-good"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	storeFile(t, r, inc("i-on-bad", "f-bad"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	storeFile(t, r, inc("i-misplaced", "f-good"), "db/t.ibd.delta", manifest.KindDelta, space, delta(data, ps, []uint32{1, 2, 3}, []uint32{1, 3, 2}))
	storeFile(t, r, inc("i-orphan", "f-gone"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	cfg := Config{Repo: r, Log: slog.New(slog.DiscardHandler), Progress: io.Discard}
	cfg.BackupID = "i-good"
	rep, err := Run(context.Background(), cfg)
	if err != nil || rep.Pages != 7 || strings.Join(rep.Chain, " ") != "f-good i-good" || rep.Files != 2 {
		t.Fatalf("intact chain: %v, %+v; want 4+3 pages of f-good i-good", err, rep)
	}
	for id, want := range map[string]string{
		"i-on-bad":    "backup f-bad failed verification: object backups/f-bad/objects/",
		"i-misplaced": "backup i-misplaced failed verification: object backups/i-misplaced/objects/00000000: damaged: db/t.ibd.delta: page 3 (at byte 32768) is not valid",
		"i-orphan":    "backup i-orphan needs its base f-gone, which is not in the repository (expired or deleted?)",
	} {
		cfg.BackupID = id
		_, err := Run(context.Background(), cfg)
		t.Logf("%s: %v", id, err)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", id, err, want)
		}
	}
}

// TestDeltaBlobInsideCluster: a blob that starts past its cluster's header has its
// pages checked by the numbers they carry; a damaged one still fails, and a header
// that is not one is refused.
func TestDeltaBlobInsideCluster(t *testing.T) {
	data := pages(t, "crc32")
	h, _ := innodb.ParseSpaceHeader(data)
	f := &manifest.File{Path: "t.ibd.delta", Kind: manifest.KindDelta, Space: &manifest.Space{ID: h.SpaceID, Flags: uint32(h.Flags)}}
	ps := int64(len(data) / 4)
	cluster := ps * ps / 4
	noop := func(int64) {}
	n, err := checkDelta(f, &manifest.Blob{RawOffset: cluster + 2*ps}, bytes.NewReader(data[2*ps:]), noop, nil)
	if err != nil || n != 2 {
		t.Fatalf("pages 2 and 3 inside a cluster: %d, %v", n, err)
	}
	bad := bytes.Clone(data[2*ps:])
	bad[ps+100] ^= 1
	if _, err := checkDelta(f, &manifest.Blob{RawOffset: cluster + 2*ps}, bytes.NewReader(bad), noop, nil); !errors.Is(err, repo.ErrDamaged) {
		t.Fatalf("damaged page inside a cluster: %v", err)
	}
	if _, err := checkDelta(f, &manifest.Blob{RawOffset: cluster}, bytes.NewReader(data), noop, nil); err == nil || !strings.Contains(err.Error(), "not \"xtra\"") {
		t.Fatalf("a page where a header belongs: %v", err)
	}
}

// TestChainRebuildsTablespaces: verify rebuilds each tablespace from the chain. A
// delta of a tablespace new to the chain that holds none of its pages (what an
// incremental by page LSN made of an imported table) would restore an empty file and
// fails, naming the table and the backup; so does a whole delta without page 0. A
// whole delta of every page, and a delta of some pages of a tablespace the base holds,
// pass.
func TestChainRebuildsTablespaces(t *testing.T) {
	data := pages(t, "fcrc32")
	h, err := innodb.ParseSpaceHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	space := &manifest.Space{ID: h.SpaceID, Flags: uint32(h.Flags)}
	whole := *space
	whole.Whole = true
	other := &manifest.Space{ID: h.SpaceID + 1, Flags: uint32(h.Flags)}
	ps := len(data) / 4
	inc := func(id string) *manifest.Manifest {
		return &manifest.Manifest{ID: id, Type: manifest.TypeIncremental, EndLSN: 200,
			Incremental: &manifest.Incremental{BaseID: "f", BaseToLSN: 100, FromLSN: 90, Method: "redo"}}
	}
	st, _ := storage.NewFS(t.TempDir())
	r, _ := repo.Init(context.Background(), st, "test")
	storeFile(t, r, &manifest.Manifest{ID: "f", Type: manifest.TypeFull, EndLSN: 100}, "db/t.ibd", manifest.KindInnoDB, space, data)
	storeFile(t, r, inc("i-some"), "db/t.ibd.delta", manifest.KindDelta, space, delta(data, ps, []uint32{2}, []uint32{2}))
	storeFile(t, r, inc("i-whole"), "db/t.ibd.delta", manifest.KindDelta, &whole, delta(data, ps, []uint32{0, 1, 2, 3}, []uint32{0, 1, 2, 3}))
	storeFile(t, r, inc("i-lost"), "db/t_back.ibd.delta", manifest.KindDelta, other, delta(data, ps, nil, nil))
	storeFile(t, r, inc("i-no-page0"), "db/t.ibd.delta", manifest.KindDelta, &whole, delta(data, ps, []uint32{1, 2}, []uint32{1, 2}))
	// A space new to the chain in a delta of its changed pages only (page 0 among them).
	storeFile(t, r, inc("i-changed-only"), "db/t_back.ibd.delta", manifest.KindDelta, other, delta(data, ps, []uint32{0, 2}, []uint32{0, 2}))
	cfg := Config{Repo: r, Log: slog.New(slog.DiscardHandler), Progress: io.Discard}
	for _, id := range []string{"i-some", "i-whole"} {
		cfg.BackupID = id
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	for id, want := range map[string]string{
		"i-lost":         "backup i-lost failed verification: damaged: the chain would restore db/t_back.ibd (space id " + strconv.Itoa(int(other.ID)) + ") empty",
		"i-no-page0":     "the chain would restore db/t.ibd (space id " + strconv.Itoa(int(space.ID)) + ") without its page 0",
		"i-changed-only": "the chain would restore db/t_back.ibd (space id " + strconv.Itoa(int(other.ID)) + ") from only the pages",
	} {
		cfg.BackupID = id
		_, err := Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, repo.ErrDamaged) {
			t.Errorf("%s: %v, want %q", id, err, want)
		}
	}
}
