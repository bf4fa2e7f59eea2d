package repo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/signing"
	"github.com/ferry-backup/ferry/internal/storage"
)

// copyFixture is a source repository of a full backup of testFiles (1 MiB parts), an
// incremental on it and a binlog archive of two objects, and an empty target.
type copyFixture struct {
	src, dst   *Repo
	full, inc  *manifest.Manifest
	srcDir     string
	dstDir     string
	dataObjs   int   // objects of both backups and the archive
	dataBytes  int64 // their bytes
	archiveLen int
}

func newCopyFixture(t *testing.T) *copyFixture {
	t.Helper()
	ctx := context.Background()
	f := &copyFixture{srcDir: t.TempDir(), dstDir: t.TempDir()}
	srcSt, err := storage.NewFS(f.srcDir)
	if err != nil {
		t.Fatal(err)
	}
	f.src, _ = Init(ctx, srcSt, "test")
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 4}, PartSize: 1 << 20, MaxMemory: 32 << 20}
	f.full = writeBackup(t, f.src, "20260101t000000z-0000f001", testFiles(), o)
	f.full.EndLSN = 100
	rewrite(t, f.src, f.full.ID, func(m *manifest.Manifest) { m.EndLSN = 100 })
	f.inc = storeLink(t, f.src, testLink{id: "20260102t000000z-0000i001", base: f.full.ID, from: 100, end: 200}, f.full.EndTime)
	for _, key := range []string{"binlogs/bin.000001/000000000004-000000000100.0a0b0c0d", "binlog-gaps/bin.000001-000000000100.json"} {
		b := []byte(strings.Repeat("b", 96))
		if err := srcSt.Put(ctx, key, bytes.NewReader(b), int64(len(b)), checksum.Sum(b)); err != nil {
			t.Fatal(err)
		}
		f.dataObjs++
		f.dataBytes += int64(len(b))
		f.archiveLen++
	}
	for _, m := range []*manifest.Manifest{f.full, f.inc} {
		f.dataObjs += len(m.Objects)
		f.dataBytes += m.StoredSize()
	}
	dstSt, err := storage.NewFS(f.dstDir)
	if err != nil {
		t.Fatal(err)
	}
	f.dst, _ = Init(ctx, dstSt, "test")
	return f
}

func (f *copyFixture) copy(t *testing.T, id string) (CopyStats, error) {
	t.Helper()
	return f.src.CopyTo(context.Background(), f.dst, id, CopyOptions{MaxMemory: 4 << 20, Parallel: 3})
}

// TestCopyChainAndResume: a copy of an incremental brings its base and the binlog
// archive, byte for byte; the copy reads back; a copy cut short (manifest and some
// objects missing, the marker left) is finished by a second run that copies only what
// is missing; a third run copies nothing.
func TestCopyChainAndResume(t *testing.T) {
	f := newCopyFixture(t)
	st, err := f.copy(t, f.inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Backups != 2 || st.Objects != f.dataObjs || st.Bytes != f.dataBytes || st.ObjectsThere != 0 || st.Archive != f.archiveLen {
		t.Fatalf("first copy: %+v; want 2 backups, %d objects, %d bytes", st, f.dataObjs, f.dataBytes)
	}
	sameTree(t, f.srcDir, f.dstDir)
	m, err := f.dst.Manifest(context.Background(), f.full.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, f.dst, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range testFiles() {
		if !bytes.Equal(got[path], want) {
			t.Errorf("%s differs after the copy", path)
		}
	}

	// Cut short: the full backup lost its manifest and every other object, kept a marker.
	dir := filepath.Join(f.dstDir, "backups", f.full.ID)
	os.Remove(filepath.Join(dir, manifestName))
	host, _ := os.Hostname()
	os.WriteFile(filepath.Join(dir, markerName), []byte(`{"id":"`+f.full.ID+`","host":"`+host+`","pid":0}`), 0o600) // a ferry gone
	var gone int
	var goneBytes int64
	for i, o := range m.Objects {
		if i%2 == 0 {
			os.Remove(filepath.Join(dir, o.Key))
			gone++
			goneBytes += o.Size
		}
	}
	list, _ := f.dst.List(context.Background())
	if list[0].Status != StatusIncomplete {
		t.Fatalf("the cut copy is listed %s", list[0].Status)
	}
	st, err = f.copy(t, f.inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Backups != 1 || st.BackupsThere != 1 || st.Objects != gone || st.Bytes != goneBytes || st.ObjectsThere != f.dataObjs-gone {
		t.Fatalf("resumed copy: %+v; want 1 backup copied, 1 there, %d objects (%d bytes) copied, %d there", st, gone, goneBytes, f.dataObjs-gone)
	}
	sameTree(t, f.srcDir, f.dstDir)
	st, err = f.copy(t, "latest")
	if err != nil || st.Objects != 0 || st.Backups != 0 || st.BackupsThere != 2 || st.ObjectsThere != f.dataObjs {
		t.Fatalf("copy again: %+v, %v; want nothing copied", st, err)
	}
}

// sameTree fails unless dst holds every object of src with the same bytes, and no
// in-progress marker.
func sameTree(t *testing.T, src, dst string) {
	t.Helper()
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == ConfigKey {
			return nil
		}
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: not copied as it is (%v)", rel, err)
		}
		return nil
	})
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == markerName {
			t.Errorf("%s left in the target", p)
		}
		return err
	})
	if _, err := os.Stat(filepath.Join(dst, ConfigKey)); err != nil {
		t.Errorf("the target has no %s: %v", ConfigKey, err)
	}
}

// TestCopyRefusesDamageAndOverwrites: an object of the source that does not match its
// manifest stops the copy, naming it, and the target gets no manifest; a backup the
// target holds under the same id with another manifest is refused and left alone.
func TestCopyRefusesDamageAndOverwrites(t *testing.T) {
	t.Run("damaged", func(t *testing.T) {
		f := newCopyFixture(t)
		victim := filepath.Join(f.srcDir, "backups", f.full.ID, f.full.Objects[1].Key)
		b, _ := os.ReadFile(victim)
		b[len(b)/2] ^= 1
		os.WriteFile(victim, b, 0o600)
		_, err := f.copy(t, f.inc.ID)
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), f.full.Objects[1].Key) {
			t.Fatalf("copy of a damaged object: %v; want ErrDamaged naming %s", err, f.full.Objects[1].Key)
		}
		for _, id := range []string{f.full.ID, f.inc.ID} {
			if _, err := os.Stat(filepath.Join(f.dstDir, "backups", id, manifestName)); err == nil {
				t.Errorf("backup %s got a manifest in the target", id)
			}
		}
		if _, err := os.Stat(filepath.Join(f.dstDir, "backups", f.full.ID, "objects", f.full.Objects[1].Key)); err == nil {
			t.Error("the damaged object was written to the target")
		}
	})
	t.Run("another backup of that id", func(t *testing.T) {
		f := newCopyFixture(t)
		other := storeLink(t, f.dst, testLink{id: f.full.ID, end: 5}, f.full.EndTime)
		before, _ := os.ReadFile(filepath.Join(f.dstDir, "backups", other.ID, manifestName))
		_, err := f.copy(t, f.inc.ID)
		if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), f.full.ID) {
			t.Fatalf("copy over another backup of the same id: %v; want ErrExists naming it", err)
		}
		after, _ := os.ReadFile(filepath.Join(f.dstDir, "backups", other.ID, manifestName))
		if !bytes.Equal(before, after) {
			t.Error("the target's manifest was overwritten")
		}
		if _, err := os.Stat(filepath.Join(f.dstDir, "backups", f.inc.ID)); err == nil {
			t.Error("the incremental was copied on a base the target holds another of")
		}
	})
	t.Run("another ferry writing it", func(t *testing.T) {
		f := newCopyFixture(t)
		dir := filepath.Join(f.dstDir, "backups", f.full.ID)
		os.MkdirAll(filepath.Join(dir, "objects"), 0o750)
		os.WriteFile(filepath.Join(dir, markerName), []byte(`{"id":"`+f.full.ID+`","host":"another-host","pid":7}`), 0o600) // written just now
		_, err := f.copy(t, f.inc.ID)
		if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "pid 7 on another-host") {
			t.Fatalf("copy of a backup another ferry is writing: %v", err)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "objects")); len(ents) != 0 {
			t.Errorf("%d objects written beside another ferry", len(ents))
		}
	})
	t.Run("budget below the largest object", func(t *testing.T) {
		f := newCopyFixture(t)
		_, err := f.src.CopyTo(context.Background(), f.dst, f.inc.ID, CopyOptions{MaxMemory: 1 << 10})
		if err == nil || !strings.Contains(err.Error(), "allow at least") {
			t.Fatalf("copy with 1 KiB of memory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(f.dstDir, ConfigKey)); err == nil {
			t.Error("a refused copy created the target repository")
		}
	})
}

// TestCopySignedBackup: a signed backup copied stays signed (the target, trusting the
// key, reads it); a copy that trusts the key refuses an unsigned backup before copying
// anything; an object whose SHA-256 is not the manifest's is refused even when its
// size and CRC-32C match.
func TestCopySignedBackup(t *testing.T) {
	ctx := context.Background()
	src, _ := Init(ctx, newFS(t), "test")
	secret, public, _ := signing.NewKey()
	priv, pub := loadTestKey(t, secret), mustPublic(t, public)
	opts := WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 4}, PartSize: 1 << 20, SignWith: priv}
	files := smallFiles(20)
	files["big.ibd"] = []byte(strings.Repeat("page", 1<<19))
	signed := writeBackup(t, src, "20260101t000000z-s", files, opts)
	opts.SignWith = nil
	unsigned := writeBackup(t, src, "20260102t000000z-u", files, opts)

	dst, _ := Init(ctx, newFS(t), "test")
	src.Trust(pub)
	if _, err := src.CopyTo(ctx, dst, signed.ID, CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	dst.Trust(pub)
	m, err := dst.Manifest(ctx, signed.ID)
	if err != nil {
		t.Fatalf("the copy of a signed backup under trust: %v", err)
	}
	if back, err := readAll(t, dst, m, nil); err != nil || string(back["big.ibd"]) != string(files["big.ibd"]) {
		t.Fatalf("read the copy: %v", err)
	}
	other, _ := Init(ctx, newFS(t), "test")
	if _, err := src.CopyTo(ctx, other, unsigned.ID, CopyOptions{}); !errors.Is(err, signing.ErrUntrusted) {
		t.Errorf("copy of an unsigned backup under trust: %v", err)
	}
	if list, _ := other.List(ctx); len(list) != 0 {
		t.Errorf("a refused copy wrote %v", list)
	}

	src.Trust(nil)
	rewrite(t, src, signed.ID, func(m *manifest.Manifest) { m.Objects[0].SHA256 = strings.Repeat("0", 64) })
	third, _ := Init(ctx, newFS(t), "test")
	if _, err := src.CopyTo(ctx, third, signed.ID, CopyOptions{}); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("copy of an object with another SHA-256: %v", err)
	}
}
