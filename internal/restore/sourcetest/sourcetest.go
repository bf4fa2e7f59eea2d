// Package sourcetest is the contract every restore.Source keeps, run the same way on
// each end a backup is restored from (a directory, a stream, a repository, a chain):
// it lists the backup's files, gives each byte back as the backup recorded it,
// refuses a damaged byte with an error naming its file, says honestly what it can do
// (Caps), and restores through restore.Restore into a datadir that appears only
// whole. The backups under test are written through the matching sink.Sink, as the
// backup engine writes them, so that the two ends are checked against each other.
package sourcetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// Damaged is the file a damaged backup (New's damaged set) has one byte wrong in.
const Damaged = "db/t.ibd"

// GTID is the position the backups under test record.
const GTID = "0-1-42"

// New makes a source holding a prepared ferry backup of files. With damaged set, the
// stored bytes of Damaged have one byte flipped after its checksum was taken, as a
// bad disk or a bad link would leave them.
type New func(t *testing.T, files map[string][]byte, damaged bool) restore.Source

// Files is the datadir the backups under test hold: a system tablespace, a
// tablespace of noise spanning several blocks, a small file and an empty one.
func Files() map[string][]byte {
	r := rand.New(rand.NewPCG(7, 11))
	noise := make([]byte, 3<<20+333)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	sys := bytes.Repeat([]byte("ibdata page "), 6000)
	return map[string][]byte{"ibdata1": sys, Damaged: noise, "db/t.frm": []byte("frm bytes\n"), "db/empty.MYD": nil}
}

// Write writes files through s as a prepared ferry backup, as the backup engine
// does: each file created, written in order and closed, xtrabackup_checkpoints, and
// the manifest committed last with every file's size and CRC-32C. With damaged set,
// Damaged is written with one byte flipped (its manifest entry keeps the true bytes').
func Write(t *testing.T, s sink.Sink, files map[string][]byte, damaged bool) *manifest.Manifest {
	t.Helper()
	ctx := context.Background()
	id := "20261128t000000z-0000cafe"
	if err := s.Open(ctx, id); err != nil {
		t.Fatal(err)
	}
	all := map[string][]byte{xtrabackup.CheckpointsFile: xtrabackup.Checkpoints{BackupType: xtrabackup.TypeLogApplied, ToLSN: 1, LastLSN: 1}.Bytes()}
	for p, b := range files {
		all[p] = b
	}
	m := &manifest.Manifest{Format: 1, Tool: "ferry", ID: id, Type: manifest.TypeFull, EndTime: time.Now(), Storage: s.Caps().Storage,
		Server:      manifest.Server{Version: "10.11.19-MariaDB", Settings: map[string]string{}},
		Coordinates: mariadb.Coordinates{GTIDBinlogPos: GTID}, Prepared: &manifest.Prepared{At: time.Now(), MariadbdVersion: "10.11.19-MariaDB"}}
	for _, p := range sortedKeys(all) {
		data := all[p]
		m.Files = append(m.Files, manifest.File{Path: p, Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data))})
		if damaged && p == Damaged {
			data = slices.Clone(data)
			data[len(data)/2] ^= 0x40
		}
		writeFile(t, s, p, data)
	}
	if err := s.Commit(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// writeFile writes one file through s in 256 KiB writes, in order.
func writeFile(t *testing.T, s sink.Sink, p string, data []byte) {
	t.Helper()
	f, err := s.Create(p, sink.FileOptions{Meta: p == xtrabackup.CheckpointsFile, Size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 256 << 10 {
		if err := f.WriteAt(data[off:min(off+256<<10, len(data))], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func sortedKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Run runs the contract on the sources newSource makes.
func Run(t *testing.T, newSource New) {
	t.Run("Caps", func(t *testing.T) { testCaps(t, newSource) })
	t.Run("FillsEveryByte", func(t *testing.T) { testFill(t, newSource) })
	t.Run("DamagedByteNamesItsFile", func(t *testing.T) { testDamaged(t, newSource) })
	t.Run("Restore", func(t *testing.T) { testRestore(t, newSource) })
	t.Run("FailedRestoreLeavesTheDatadir", func(t *testing.T) { testFailedRestore(t, newSource) })
}

// testCaps: what Caps says matches what the source does and implements.
func testCaps(t *testing.T, newSource New) {
	src := newSource(t, Files(), false)
	c := src.Caps()
	b, err := src.Inspect(context.Background())
	switch {
	case c.Inspect && (err != nil || b == nil):
		t.Fatalf("Caps().Inspect is set but Inspect = %v, %v", b, err)
	case c.Inspect:
		checkPaths(t, b)
	case !errors.Is(err, restore.ErrNoInspect) || b != nil:
		t.Fatalf("Caps().Inspect is not set but Inspect = %v, %v; want ErrNoInspect", b, err)
	}
	_, consuming := src.(restore.Consuming)
	_, following := src.(restore.Following)
	_, local := src.(restore.LocalSource)
	if c.Consume != consuming || c.FollowLog != following || c.Local != local {
		t.Errorf("Caps %+v, but implements Consuming %v, Following %v, LocalSource %v", c, consuming, following, local)
	}
	if c.Moves && !c.Consume {
		t.Errorf("Caps %+v: a source that moves the backup's files must own its staging directory (Consume)", c)
	}
	if c2 := src.Caps(); c2 != c {
		t.Errorf("Caps changed after Inspect: %+v, then %+v", c, c2)
	}
}

// checkPaths: the backup Inspect tells lists every file of the backup.
func checkPaths(t *testing.T, b *restore.Backup) {
	t.Helper()
	paths, err := b.Paths()
	if err != nil {
		t.Fatal(err)
	}
	for p := range Files() {
		if !slices.Contains(paths, p) {
			t.Errorf("Inspect's backup lists %v, without %s", paths, p)
		}
	}
	if c := b.Manifest; c == nil || c.Coordinates.GTIDBinlogPos != GTID {
		t.Errorf("Inspect's backup has manifest %+v, want one at %s", c, GTID)
	}
}

// testFill: Fill writes every file into staging, byte for byte, and returns the
// backup, prepared, at its coordinates; a local source verifies it in place too.
func testFill(t *testing.T, newSource New) {
	files := Files()
	src := newSource(t, files, false)
	staging, b, err := fill(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Prepared || b.Manifest == nil || b.Manifest.Coordinates.GTIDBinlogPos != GTID {
		t.Errorf("Fill returned %+v, want the prepared backup at %s", b, GTID)
	}
	for p, data := range files {
		n, crc, err := filecopy.FileCRC(filepath.Join(staging, p))
		if err != nil || n != int64(len(data)) || crc != checksum.Sum(data) {
			t.Errorf("%s in staging: %d bytes with CRC-32C %08x (%v), want %d with %08x", p, n, crc, err, len(data), checksum.Sum(data))
		}
	}
	if src.Caps().Local {
		if _, err := src.(restore.LocalSource).Verify(context.Background(), env(), nil); err != nil {
			t.Errorf("Verify of a whole backup: %v", err)
		}
	}
}

// testDamaged: a byte damaged in the stored backup stops the restore before it is
// used, with an error naming the file.
func testDamaged(t *testing.T, newSource New) {
	src := newSource(t, Files(), true)
	_, _, err := fill(t, src)
	if err == nil || !strings.Contains(err.Error(), Damaged) {
		t.Fatalf("a damaged %s gave %v, want an error naming it", Damaged, err)
	}
	if src := newSource(t, Files(), true); src.Caps().Local {
		_, err := src.(restore.LocalSource).Verify(context.Background(), env(), nil)
		if err == nil || !strings.Contains(err.Error(), Damaged) {
			t.Errorf("Verify of a damaged %s gave %v, want an error naming it", Damaged, err)
		}
	}
}

// fill runs Inspect (if the source has it), Staging and Fill, as Restore does.
func fill(t *testing.T, src restore.Source) (string, *restore.Backup, error) {
	t.Helper()
	if src.Caps().Inspect {
		if _, err := src.Inspect(context.Background()); err != nil {
			return "", nil, err
		}
	}
	staging, err := src.Staging(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Fill(context.Background(), staging, env())
	return staging, b, err
}

// testRestore: restore.Restore makes a datadir of exactly the backup's datadir
// files, at the backup's coordinates, and leaves no staging directory.
func testRestore(t *testing.T, newSource New) {
	files := Files()
	datadir := filepath.Join(t.TempDir(), "data")
	res, err := restore.Restore(context.Background(), config(newSource(t, files, false), datadir))
	if err != nil {
		t.Fatal(err)
	}
	if res.Coordinates.GTIDBinlogPos != GTID || res.Datadir != datadir {
		t.Errorf("Restore = %+v, want %s at %s", res, datadir, GTID)
	}
	if got, want := tree(t, datadir), sortedKeys(files); !slices.Equal(got, want) {
		t.Errorf("the datadir holds %v, want %v", got, want)
	}
	for p, data := range files {
		if b, err := os.ReadFile(filepath.Join(datadir, p)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s in the datadir: %d bytes (%v), want the backup's %d", p, len(b), err, len(data))
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(datadir), ".data.ferry-*")); len(left) > 0 {
		t.Errorf("the restore left %v", left)
	}
}

// testFailedRestore: a restore of a damaged backup over a datadir (Replace) fails and
// leaves the datadir as it was; its staging directory is gone, unless the source keeps
// it for --resume and the error says so.
func testFailedRestore(t *testing.T, newSource New) {
	datadir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(datadir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(datadir, "ibdata1"), []byte("the old datadir"), 0o640); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, Files(), true)
	cfg := config(src, datadir)
	cfg.Replace = true
	_, err := restore.Restore(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), Damaged) {
		t.Fatalf("Restore of a damaged backup = %v, want an error naming %s", err, Damaged)
	}
	if got := tree(t, datadir); !slices.Equal(got, []string{"ibdata1"}) {
		t.Errorf("the failed restore left the datadir holding %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(datadir, "ibdata1")); string(b) != "the old datadir" {
		t.Errorf("the failed restore changed the datadir's ibdata1: %q", b)
	}
	// A source may refuse the backup before it makes a staging directory (a
	// repository checks its manifest's checksums first).
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(datadir), ".data.ferry-*"))
	if kept := len(left) > 0; kept && !src.Caps().Resume || kept != strings.Contains(setting.Render(err, setting.Names{setting.Resume: "--resume"}), "--resume") {
		t.Errorf("Caps %+v; the failed restore left %v and says %v", src.Caps(), left, err)
	}
}

// tree lists the files under dir, '/' separated and sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// config is a restore of src into datadir with no server: the backups are prepared,
// and a source that tells nothing before its data only asks whether one is there.
func config(src restore.Source, datadir string) restore.Config {
	return restore.Config{Source: src, Datadir: datadir, Recoverer: NoServer{}, Log: quiet(), Progress: io.Discard}
}

func env() restore.Env { return restore.Env{Log: quiet(), Progress: io.Discard} }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// NoServer is a Recoverer for prepared backups: it names a server that is never run,
// and refuses to recover.
type NoServer struct{}

// Server implements restore.Recoverer.
func (NoServer) Server(context.Context, *restore.Backup) (string, error) { return "mariadbd", nil }

// Recover implements restore.Recoverer.
func (NoServer) Recover(context.Context, restore.RecoverJob) error {
	return errors.New("sourcetest: a prepared backup was sent to recovery")
}
