package backup_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/backup/backuptest"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/clock"
	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/testdb"
)

var t0 = time.Date(2026, 11, 28, 1, 2, 3, 0, time.UTC)

// runConfig is a backup of srv into a new directory, on a fake clock.
func runConfig(t *testing.T, srv *backuptest.Server) (backup.Config, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bk")
	d, err := sink.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return backup.Config{Server: srv, Sink: d, Clock: clock.NewFake(t0), Parallel: 2, Version: "test",
		Log: slog.New(slog.DiscardHandler), Progress: io.Discard, Spool: backup.SpoolOptions{Dir: t.TempDir(), Max: 64 << 20}}, dir
}

// TestRunFull drives backup.Run end to end against the fake server: every file of the
// datadir is in the backup with the size and CRC-32C its manifest says, the redo the
// copy wrote is the backup's ib_logfile0, the end LSN and coordinates are the ones read
// under BLOCK_COMMIT, the times are the job's clock's, and the manifest came last.
func TestRunFull(t *testing.T) {
	srv := backuptest.New(t)
	cfg, dir := runConfig(t, srv)
	res, err := backup.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(dir)
	if err != nil {
		t.Fatalf("no manifest after a backup that succeeded: %v", err)
	}
	if m.ID != res.Manifest.ID || m.Type != manifest.TypeFull || m.EndLSN != srv.End || m.ToLSN != srv.End ||
		m.Coordinates.GTIDBinlogPos != "0-1-42" || m.Coordinates.BinlogPos != 4242 || m.Server.UID != "fake-server-uid" {
		t.Fatalf("manifest %+v", m)
	}
	if !m.StartTime.Equal(t0) || !m.EndTime.Equal(t0) {
		t.Fatalf("start %v end %v, want the fake clock's %v", m.StartTime, m.EndTime, t0)
	}
	want := map[string][]byte{"ib_logfile0": srv.Redo}
	for _, rel := range []string{"ibdata1", "db/t.ibd", "db/t.frm", "db/log.CSV", "aria_log_control"} {
		b, err := os.ReadFile(filepath.Join(srv.Datadir, rel))
		if err != nil {
			t.Fatal(err)
		}
		want[rel] = b
	}
	got := map[string]manifest.File{}
	for _, f := range m.Files {
		got[f.Path] = f
	}
	for rel, b := range want {
		f, ok := got[rel]
		if !ok {
			t.Fatalf("%s is not in the manifest (it lists %v)", rel, slices.Collect(mapsKeys(got)))
		}
		copied, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(copied, b) || f.Size != int64(len(b)) || f.CRC32C != checksum.Hex(checksum.Sum(b)) {
			t.Fatalf("%s: copied %d bytes (equal %v), manifest size %d CRC %s, want %d bytes CRC %s",
				rel, len(copied), bytes.Equal(copied, b), f.Size, f.CRC32C, len(b), checksum.Hex(checksum.Sum(b)))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); !os.IsNotExist(err) {
		t.Fatalf("the incomplete marker is still there: %v", err)
	}
	checkManifestLast(t, dir)
}

// checkManifestLast: no file of the backup was written after its manifest.
func checkManifestLast(t *testing.T, dir string) {
	t.Helper()
	mi, err := os.Stat(filepath.Join(dir, manifest.FileName))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err == nil && fi.ModTime().After(mi.ModTime()) {
			t.Errorf("%s was written after the manifest", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestRunLockSequence: the stages are entered in order, the end is read under
// BLOCK_COMMIT, and the session is closed after the lock is released; with
// --safe-slave-backup the replica's SQL thread is paused before FLUSH and resumed only
// after BLOCK_COMMIT ends.
func TestRunLockSequence(t *testing.T) {
	for _, safe := range []bool{false, true} {
		srv := backuptest.New(t)
		cfg, _ := runConfig(t, srv)
		cfg.Replica.SafeSlave = safe
		if _, err := backup.Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		want := []string{"connect", "BACKUP STAGE START", "BACKUP STAGE FLUSH", "BACKUP STAGE BLOCK_DDL",
			"BACKUP STAGE BLOCK_COMMIT", "read end", "BACKUP STAGE END", "unlock", "close"}
		if safe {
			want = slices.Insert(want, 2, "pause replica")
			want = slices.Insert(want, 8, "resume replica")
		}
		if got := srv.Events(); !slices.Equal(got, want) {
			t.Fatalf("safe-slave-backup %v: the backup did\n%q\nwant\n%q", safe, got, want)
		}
	}
}

// cancelOn is a directory end that cancels the backup (as Ctrl-C does) when the copy
// of one file starts.
type cancelOn struct {
	sink.Sink
	rel    string
	cancel context.CancelFunc
}

func (c *cancelOn) Create(rel string, o sink.FileOptions) (sink.File, error) {
	if rel == c.rel {
		c.cancel()
	}
	return c.Sink.Create(rel, o)
}

// TestRunInterrupted: a backup cancelled in the middle of the data copy returns an
// error that says it was interrupted and how the end was left, writes no manifest,
// leaves the incomplete marker, and never enters BLOCK_DDL.
func TestRunInterrupted(t *testing.T) {
	srv := backuptest.New(t)
	cfg, dir := runConfig(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Sink = &cancelOn{Sink: cfg.Sink, rel: "db/t.ibd", cancel: cancel}
	_, err := backup.Run(ctx, cfg)
	if err == nil {
		t.Fatal("a cancelled backup succeeded")
	}
	if want := "backup interrupted; the partial backup in " + dir + " is marked incomplete"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.FileName)); !os.IsNotExist(err) {
		t.Fatalf("a cancelled backup has a manifest: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err != nil {
		t.Fatalf("the incomplete marker is gone: %v", err)
	}
	if ev := srv.Events(); slices.Contains(ev, "BACKUP STAGE BLOCK_DDL") || ev[len(ev)-1] != "close" {
		t.Fatalf("the cancelled backup did %q: want no BLOCK_DDL and the session closed", ev)
	}
}

// TestRunIncremental: an incremental on a full backup of the fake server holds, as a
// .delta, the page the redo since the base names (read from the server's file as it is
// now) and not the others, says which base it applies on, and applied onto the base
// makes the base's copy of the tablespace the server's file.
func TestRunIncremental(t *testing.T) {
	const ps = backuptest.PageSize
	srv := backuptest.New(t)
	now := testdb.PageFixture(t, "fcrc32.after.gz")
	stale := append(append([]byte{}, now[:3*ps]...), testdb.PageFixture(t, "fcrc32.before.gz")[:ps]...)
	tbl := filepath.Join(srv.Datadir, "db", "t.ibd")
	if err := os.WriteFile(tbl, stale, 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, full := runConfig(t, srv)
	if _, err := backup.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	base, err := backup.BaseFromDir(full)
	if err != nil {
		t.Fatal(err)
	}
	// An UPDATE changes page 3; the server's checkpoint and LSN move on.
	if err := os.WriteFile(tbl, now, 0o640); err != nil {
		t.Fatal(err)
	}
	srv.Changed = []redo.PageID{{Space: binary.BigEndian.Uint32(now[34:]), Page: 3}}
	srv.Checkpoint, srv.End = 200000, 223456
	cfg, inc := runConfig(t, srv)
	cfg.Incremental = base
	if _, err := backup.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(inc)
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != manifest.TypeIncremental || m.Incremental == nil || m.Incremental.BaseID != base.ID || m.Incremental.Method != "redo" {
		t.Fatalf("manifest type %q incremental %+v, want an incremental on %s by redo", m.Type, m.Incremental, base.ID)
	}
	b, err := os.ReadFile(filepath.Join(inc, "db", "t.ibd.delta"))
	if err != nil {
		t.Fatal(err)
	}
	r := delta.NewReader(bytes.NewReader(b), int64(len(b)), ps)
	var got []uint32
	for {
		no, page, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(page, now[int(no)*ps:int(no+1)*ps]) {
			t.Fatalf("page %d of the delta is not the server's", no)
		}
		got = append(got, no)
	}
	if slices.Contains(got, 1) || slices.Contains(got, 2) || !slices.Contains(got, 3) {
		t.Fatalf("the delta holds pages %v, want page 3 and not 1 or 2", got)
	}
	if _, err := delta.ApplyDir(full, inc, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if applied, err := os.ReadFile(filepath.Join(full, "db", "t.ibd")); err != nil || !bytes.Equal(applied, now) {
		t.Fatalf("the base with the incremental applied does not hold the server's file (%v)", err)
	}
}
