package backup_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/backup/backuptest"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// farLSN is a checkpoint distance that makes a re-copy round worth it (well above the
// engine's 16 MiB keep target).
const farLSN = 64 << 20

// updatedDuringCopy sets up the fake server's db/t.ibd as it was when the copy read
// it (page 3 older) and returns the file as an UPDATE leaves it, which the test writes
// into the datadir once the copy is done, and the LSN of the old page 3.
func updatedDuringCopy(t *testing.T, srv *backuptest.Server) (now []byte, oldPage3LSN uint64) {
	t.Helper()
	const ps = backuptest.PageSize
	now = testdb.PageFixture(t, "fcrc32.after.gz")
	before := testdb.PageFixture(t, "fcrc32.before.gz")
	stale := append(append([]byte{}, now[:3*ps]...), before[:ps]...)
	if err := os.WriteFile(filepath.Join(srv.Datadir, "db", "t.ibd"), stale, 0o640); err != nil {
		t.Fatal(err)
	}
	return now, binary.BigEndian.Uint64(before[16:])
}

// writeAt returns an OnOpen that writes data into rel of the datadir as redo copy n
// opens (n 1: the first re-copy round, after the data copy).
func writeAt(t *testing.T, srv *backuptest.Server, n int, rel string, data []byte) func(int) {
	return func(k int) {
		if k == n {
			if err := os.WriteFile(filepath.Join(srv.Datadir, rel), data, 0o640); err != nil {
				t.Error(err)
			}
		}
	}
}

// checkFile: the backup's copy of rel holds want, and the manifest's size and CRC-32C
// are those of want.
func checkFile(t *testing.T, dir string, m *manifest.Manifest, rel string, want []byte, what string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the backup's %s is not %s", rel, what)
	}
	for _, f := range m.Files {
		if f.Path == rel {
			if f.Size != int64(len(want)) || f.CRC32C != checksum.Hex(checksum.Sum(want)) {
				t.Fatalf("%s: manifest size %d CRC %s, the copy has %d bytes CRC %s", rel, f.Size, f.CRC32C, len(want), checksum.Hex(checksum.Sum(want)))
			}
			return
		}
	}
	t.Fatalf("%s is not in the manifest", rel)
}

// checkReleased: the backup left no redo copy running and the lock sequence closed.
func checkReleased(t *testing.T, srv *backuptest.Server) {
	t.Helper()
	if n := srv.Running(); n != 0 {
		t.Errorf("%d redo copies still run after backup.Run returned", n)
	}
	if srv.LockHeld() {
		t.Errorf("the lock sequence is still open after backup.Run returned: %q", srv.Events())
	}
}

// TestRunThreeStageRounds drives the three-stage copy through backup.Run: the tracker
// sees page 3 of db/t.ibd change while the copy read the old page; the server's
// checkpoint moves far on twice, so a first round copies page 3 again and a second
// round (the first one's changes: none) follows; then the checkpoint stops. The
// backup's copy is the server's file, its redo is the last round's copy (the tracker's
// and the first round's dropped) and starts at that round's checkpoint.
func TestRunThreeStageRounds(t *testing.T) {
	t.Parallel()
	srv := backuptest.New(t)
	now, _ := updatedDuringCopy(t, srv)
	space := backuptest.SpaceID(now)
	base := srv.Checkpoint
	srv.Script = []backuptest.Copy{
		{Start: base, Pages: []redo.PageID{{Space: space, Page: 3}}, Redo: []byte("the tracker's redo\n")},
		{Start: base + farLSN, Redo: []byte("the first round's redo\n")},
		{Start: base + 2*farLSN, Redo: []byte("the second round's redo\n")},
	}
	srv.End = base + 3*farLSN
	srv.OnOpen = writeAt(t, srv, 1, "db/t.ibd", now)
	cfg, dir := runConfig(t, srv)
	res, err := backup.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReleased(t, srv)
	if res.Rounds != 2 || res.PagesRecopied != 1 || srv.Copies() != 3 {
		t.Fatalf("rounds %d, pages copied again %d, redo copies %d; want 2, 1, 3", res.Rounds, res.PagesRecopied, srv.Copies())
	}
	m, err := manifest.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, dir, m, "db/t.ibd", now, "the server's file (page 3 copied again)")
	checkFile(t, dir, m, "ib_logfile0", srv.Script[2].Redo, "the last round's redo")
	if m.StartLSN != srv.Script[2].Start || m.EndLSN != srv.End {
		t.Fatalf("manifest start LSN %d end %d, want the last round's checkpoint %d and %d", m.StartLSN, m.EndLSN, srv.Script[2].Start, srv.End)
	}
}

// TestRunThreeStageLappedTracker: the server laps the tracker (its redo copy fails
// with redo.OverwrittenError, as the real one does). The backup does not fail: the
// round cannot know the changed pages, so it reads every page and copies again those
// whose page LSN is above the tracker's start (recopy.go, recopyChanged), and says so;
// the tracker's partial redo is dropped for the round's. With the tracker's start
// above every page's LSN the same fallback copies nothing again: the filter is the
// page LSN. A round that fell back counts as shrinking: if the checkpoint moves on
// far enough, another round follows, from the first round's page set.
func TestRunThreeStageLappedTracker(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		start func(now, ibdata []byte, oldPage3 uint64) uint64
		fresh bool // the backup's copy is the server's file now (else the one copied first)
		more  bool // the checkpoint moves on again after the round
	}{
		{"page 3 newer than the start", func(_, _ []byte, old uint64) uint64 { return old }, true, false},
		{"no page newer than the start", func(now, ibdata []byte, _ uint64) uint64 {
			return max(newestLSN(now), newestLSN(ibdata))
		}, false, false},
		{"checkpoint moves on after the fallback", func(_, _ []byte, old uint64) uint64 { return old }, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := backuptest.New(t)
			now, old := updatedDuringCopy(t, srv)
			stale, err := os.ReadFile(filepath.Join(srv.Datadir, "db", "t.ibd"))
			if err != nil {
				t.Fatal(err)
			}
			ibdata, err := os.ReadFile(filepath.Join(srv.Datadir, "ibdata1"))
			if err != nil {
				t.Fatal(err)
			}
			start := c.start(now, ibdata, old)
			srv.Script = []backuptest.Copy{
				{Start: start, Lapped: true},
				{Start: start + farLSN, Redo: []byte("the round's redo\n")},
			}
			if c.more {
				// The round's copy names many pages: without the fallback, the round
				// would not count as shrinking.
				for p := range uint32(64) {
					srv.Script[1].Pages = append(srv.Script[1].Pages, redo.PageID{Space: backuptest.SpaceID(now), Page: p})
				}
				srv.Script = append(srv.Script, backuptest.Copy{Start: start + 2*farLSN, Redo: []byte("the second round's redo\n")})
			}
			last := srv.Script[len(srv.Script)-1]
			srv.End = start + 3*farLSN
			srv.OnOpen = writeAt(t, srv, 1, "db/t.ibd", now)
			cfg, dir := runConfig(t, srv)
			logs := new(bytes.Buffer)
			cfg.Log = slog.New(slog.NewTextHandler(logs, nil))
			res, err := backup.Run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("a lapped tracker failed the backup: %v", err)
			}
			checkReleased(t, srv)
			if !strings.Contains(logs.String(), "overwrote redo the page tracker had not read") {
				t.Fatalf("the fallback is not logged:\n%s", logs)
			}
			m, err := manifest.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, dir, m, "ib_logfile0", last.Redo, "the last round's redo")
			if m.StartLSN != last.Start || res.Rounds != len(srv.Script)-1 {
				t.Fatalf("start LSN %d, rounds %d; want the last round's checkpoint %d, %d", m.StartLSN, res.Rounds, last.Start, len(srv.Script)-1)
			}
			if c.fresh {
				checkFile(t, dir, m, "db/t.ibd", now, "the server's file (page 3 copied again)")
				if res.PagesRecopied == 0 {
					t.Fatal("no page copied again")
				}
			} else {
				checkFile(t, dir, m, "db/t.ibd", stale, "the file as first copied")
				if res.PagesRecopied != 0 {
					t.Fatalf("%d pages copied again, none newer than the start", res.PagesRecopied)
				}
			}
		})
	}
}

// newestLSN is the highest FIL_PAGE_LSN of a tablespace's pages.
func newestLSN(b []byte) uint64 {
	var n uint64
	for off := 0; off+backuptest.PageSize <= len(b); off += backuptest.PageSize {
		n = max(n, binary.BigEndian.Uint64(b[off+16:]))
	}
	return n
}
