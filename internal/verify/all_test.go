package verify

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/storage"
)

// countingStorage counts the reads of each object.
type countingStorage struct {
	storage.Storage
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingStorage) Get(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	c.mu.Lock()
	c.reads[key]++
	c.mu.Unlock()
	return c.Storage.Get(ctx, key, off, n, fn)
}

// TestAllVerifiesEveryBackupOnce: every backup of the repository is verified; a full
// backup that several incrementals apply on is read once; a damaged backup fails, and
// so does each incremental on it, naming it; a broken chain fails, and so does a
// backup whose manifest cannot be read, and the incremental on it, without stopping
// the others; the others pass.
func TestAllVerifiesEveryBackupOnce(t *testing.T) {
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
	dir := t.TempDir()
	fs, _ := storage.NewFS(dir)
	st := &countingStorage{Storage: fs, reads: map[string]int{}}
	r, _ := repo.Init(context.Background(), st, "test")
	good := delta(data, ps, []uint32{1, 2, 3}, []uint32{1, 2, 3})
	storeFile(t, r, &manifest.Manifest{ID: "1-bad", Type: manifest.TypeFull, EndLSN: 100}, "db/t.ibd", manifest.KindInnoDB, space, bad)
	storeFile(t, r, inc("2-on-bad", "1-bad"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	storeFile(t, r, &manifest.Manifest{ID: "3-good", Type: manifest.TypeFull, EndLSN: 100}, "db/t.ibd", manifest.KindInnoDB, space, data)
	storeFile(t, r, inc("4-inc", "3-good"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	storeFile(t, r, inc("5-inc", "3-good"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	storeFile(t, r, inc("6-orphan", "0-gone"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	storeFile(t, r, &manifest.Manifest{ID: "7-garbled", Type: manifest.TypeFull, EndLSN: 100}, "db/t.ibd", manifest.KindInnoDB, space, data)
	storeFile(t, r, inc("8-on-garbled", "7-garbled"), "db/t.ibd.delta", manifest.KindDelta, space, good)
	if err := os.WriteFile(filepath.Join(dir, "backups", "7-garbled", "manifest.json"), []byte("{garbled"), 0o600); err != nil {
		t.Fatal(err)
	}
	clear(st.reads)

	cfg := Config{Repo: r, Log: slog.New(slog.DiscardHandler), Progress: io.Discard}
	sum, err := All(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"1-bad":    "backup 1-bad failed verification: object backups/1-bad/objects/",
		"2-on-bad": "backup 2-on-bad cannot be restored: 1-bad of its chain failed verification",
		"3-good":   "",
		"4-inc":    "",
		"5-inc":    "",
		"6-orphan": "backup 6-orphan needs its base 0-gone, which is not in the repository",
		"8-on-garbled": "backup 8-on-garbled needs its base 7-garbled, whose manifest cannot be read: " +
			"backups/7-garbled/manifest.json in " + dir + " is not valid JSON",
	}
	if len(sum.Unreadable) != 1 || sum.Unreadable[0].ID != "7-garbled" || !strings.Contains(sum.Unreadable[0].Err.Error(), "backup 7-garbled failed verification: backups/7-garbled/manifest.json") {
		t.Errorf("unreadable manifests: %+v, want 7-garbled's", sum.Unreadable)
	}
	if len(sum.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(sum.Results), len(want), sum.Results)
	}
	for _, res := range sum.Results {
		t.Logf("%s: chain %v, %d pages, %v", res.ID, res.Report.Chain, res.Report.Pages, res.Err)
		w := want[res.ID]
		if w == "" && res.Err != nil || w != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), w)) {
			t.Errorf("%s: %v, want %q", res.ID, res.Err, w)
		}
	}
	if got := strings.Join(sum.Results[4].Report.Chain, " "); got != "3-good 5-inc" {
		t.Errorf("chain of 5-inc: %q", got)
	}
	if n := len(sum.Failed()); n != 5 {
		t.Errorf("%d failed, want 5", n)
	}
	objects := 0
	for key, n := range st.reads {
		if strings.Contains(key, "/objects/") {
			objects++
			want := 1
			if strings.Contains(key, "/1-bad/") {
				want = 2 // a damaged read is tried once more (repo.readObject)
			}
			if n != want {
				t.Errorf("object %s read %d times, want %d", key, n, want)
			}
		}
	}
	if objects != len(want) {
		t.Errorf("%d objects read, want one of each of the %d backups with a manifest", objects, len(want))
	}
}
