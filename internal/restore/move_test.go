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

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// preparedBackup writes a backup directory ferry opens as prepared (no recovery runs)
// with the given datadir files, and the metadata files a backup keeps.
func preparedBackup(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "full")
	m := &manifest.Manifest{ID: "20261127t000000z-0000beef", Prepared: &manifest.Prepared{},
		Server: manifest.Server{Version: "10.11.19-MariaDB", Settings: map[string]string{}}}
	for p, body := range files {
		write(t, dir, p)
		os.WriteFile(filepath.Join(dir, p), []byte(body), 0o640)
		m.Files = append(m.Files, manifest.File{Path: p, Size: int64(len(body)), CRC32C: checksum.Hex(checksum.Sum([]byte(body)))})
	}
	for _, meta := range []string{xtrabackup.SlaveInfoFile, xtrabackup.GaleraInfoFile} {
		os.WriteFile(filepath.Join(dir, meta), []byte("meta"), 0o640)
	}
	if err := xtrabackup.WriteCheckpoints(dir, xtrabackup.Checkpoints{BackupType: xtrabackup.TypeLogApplied}); err != nil {
		t.Fatal(err)
	}
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMoveFailedSwapPutsEverythingBack: a --move whose swap fails (the datadir got
// contents meanwhile) puts every file back, backup-only metadata files included, and
// leaves no staging directory or journal.
func TestMoveFailedSwapPutsEverythingBack(t *testing.T) {
	files := map[string]string{"ibdata1": "system", "db/t.ibd": "pages"}
	dir := preparedBackup(t, files)
	before := names(t, dir)
	datadir := filepath.Join(t.TempDir(), "data")
	src := &DirSource{Dir: dir, Move: true, Parallel: 1}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := Restore(context.Background(), Config{Source: src, Datadir: datadir, Log: log, Progress: io.Discard,
		BeforeSwap: func(mariadb.Coordinates) error {
			os.MkdirAll(datadir, 0o750)
			return os.WriteFile(filepath.Join(datadir, "someone"), nil, 0o640)
		}})
	if err == nil || !strings.Contains(err.Error(), "the backup is whole") {
		t.Fatalf("err = %v, want the files put back", err)
	}
	if got := names(t, dir); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Fatalf("the backup holds %v, had %v", got, before)
	}
	for p, body := range files {
		if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != body {
			t.Errorf("%s holds %q", p, b)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(datadir), ".data.ferry-*")); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}

// TestMoveResumeAfterRecoveryBegan: a resumed --move whose journal says recovery had
// begun does not look for the files in the backup again (recovery may have removed
// some, DDL markers renamed others): it runs on what staging holds.
func TestMoveResumeAfterRecoveryBegan(t *testing.T) {
	dir := preparedBackup(t, map[string]string{"ibdata1": "system", "db/gone.ibd": "dropped by recovery"})
	datadir := filepath.Join(t.TempDir(), "data")
	src := &DirSource{Dir: dir, Move: true, Resume: true, Parallel: 1}
	if _, err := src.Inspect(context.Background()); err != nil {
		t.Fatal(err)
	}
	staging, err := src.Staging(datadir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"ibdata1", "db/gone.ibd"} { // moved, then recovery dropped one
		os.MkdirAll(filepath.Dir(filepath.Join(staging, p)), 0o750)
		os.Rename(filepath.Join(dir, p), filepath.Join(staging, p))
	}
	os.Remove(filepath.Join(staging, "db/gone.ibd"))
	if err := src.Phase(staging, phaseRecovering); err != nil {
		t.Fatal(err)
	}
	again := &DirSource{Dir: dir, Move: true, Resume: true, Parallel: 1}
	if _, err := again.Inspect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Staging(datadir); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := again.Fill(context.Background(), staging, Env{Log: log, Progress: io.Discard}); err != nil {
		t.Fatalf("a resume after recovery began looked for the files again: %v", err)
	}
	err = again.Settle(staging, errors.New("recovery failed again"))
	if !strings.Contains(cliText(err), "--resume") {
		t.Errorf("after recovery began a failure says %v", err)
	}
	if _, serr := os.Stat(filepath.Join(staging, "ibdata1")); serr != nil {
		t.Errorf("a failure after recovery began moved the files: %v", serr)
	}
}
