package restore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/restore/sourcetest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// fakePreparer stands for the server of ferry prepare: its recovery rewrites ibdata1
// (or fails with err).
type fakePreparer struct {
	calls []string
	jobs  []restore.RecoverJob
	err   error
}

func (p *fakePreparer) Server(_ context.Context, b *restore.Backup) (string, error) {
	p.calls = append(p.calls, "server "+b.ServerVersion)
	return "/fake/mariadbd", nil
}

func (p *fakePreparer) Version(_ context.Context, bin string) (string, error) {
	p.calls = append(p.calls, "version "+bin)
	return "10.11.20", nil
}

func (p *fakePreparer) Recover(_ context.Context, job restore.RecoverJob) error {
	p.calls = append(p.calls, "recover")
	p.jobs = append(p.jobs, job)
	if p.err != nil {
		return p.err
	}
	return os.WriteFile(filepath.Join(job.Dir, "ibdata1"), []byte("recovered"), 0o640)
}

// unpreparedBackup writes an unprepared full ferry backup of files into a directory
// (or an incremental, with inc set) and returns it.
func unpreparedBackup(t *testing.T, files map[string][]byte, inc bool) string {
	dir := filepath.Join(t.TempDir(), "backup")
	s, err := sink.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := sourcetest.Manifest(s.Caps().Storage)
	m.Prepared, m.StartLSN, m.EndLSN = nil, 1000, 2000
	cp := xtrabackup.Checkpoints{BackupType: xtrabackup.TypeFull, ToLSN: 2000, LastLSN: 2000}
	if inc {
		m.Type, m.Incremental = manifest.TypeIncremental, &manifest.Incremental{BaseToLSN: 900, FromLSN: 800}
		cp = xtrabackup.Checkpoints{BackupType: xtrabackup.TypeIncremental, FromLSN: 900, ToLSN: 2000, LastLSN: 2000}
	}
	if err := sourcetest.WriteBackup(s, m, cp, files, false); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPrepareRecoversThroughTheSeam drives ferry prepare end to end with a fake
// server, no mariadbd: the backup's server is found, the copy recovered once in
// place with its error log beside it, and the backup marked prepared with the
// server's version and the new checksums of what recovery changed, so that a restore
// of it verifies; a second prepare does nothing; a failed recovery leaves the backup
// unprepared; an incremental is refused before any server is asked.
func TestPrepareRecoversThroughTheSeam(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	files := map[string][]byte{"ibdata1": []byte("system"), "db/t.ibd": []byte("pages"), "ib_logfile0": []byte("redo")}
	t.Run("prepared", func(t *testing.T) {
		t0 := time.Now()
		dir := unpreparedBackup(t, files, false)
		rec := &fakePreparer{}
		if err := restore.Prepare(context.Background(), restore.PrepareConfig{Dir: dir, Recoverer: rec, Log: log}); err != nil {
			t.Fatal(err)
		}
		if want := []string{"server 10.11.19-MariaDB", "version /fake/mariadbd", "recover"}; !slices.Equal(rec.calls, want) {
			t.Errorf("calls %q, want %q", rec.calls, want)
		}
		if j := rec.jobs[0]; j.Dir != dir || j.Bin != "/fake/mariadbd" || j.Force != 0 || filepath.Dir(j.ErrLog) != filepath.Dir(dir) {
			t.Errorf("recovery job %+v, want one in place on %s, its error log beside it", j, dir)
		}
		b, err := restore.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Prepared || b.ForeignPrepared || b.Manifest.Prepared.MariadbdVersion != "10.11.20" || b.Checkpoints.BackupType != xtrabackup.TypeLogApplied {
			t.Errorf("after prepare: prepared %v (foreign %v), manifest %+v, checkpoints %+v", b.Prepared, b.ForeignPrepared, b.Manifest.Prepared, b.Checkpoints)
		}
		for _, f := range b.Manifest.Files {
			if f.Path == "ibdata1" && f.CRC32C != checksum.Hex(checksum.Sum([]byte("recovered"))) {
				t.Errorf("the manifest keeps ibdata1's checksum from before recovery: %+v", f)
			}
		}
		if _, err := (&restore.DirSource{Dir: dir}).Verify(context.Background(), restore.Env{Log: log, Progress: io.Discard}, nil); err != nil {
			t.Errorf("the prepared backup does not verify: %v", err)
		}
		again := &fakePreparer{}
		if err := restore.Prepare(context.Background(), restore.PrepareConfig{Dir: dir, Recoverer: again, Log: log}); err != nil || len(again.calls) > 0 {
			t.Errorf("a second prepare: %v, calls %q; want nothing done", err, again.calls)
		}
		if took := time.Since(t0); took > time.Second {
			t.Errorf("a prepare without a server took %v", took)
		}
	})
	t.Run("failed recovery", func(t *testing.T) {
		dir := unpreparedBackup(t, files, false)
		rec := &fakePreparer{err: errors.New("InnoDB: redo log is corrupt")}
		err := restore.Prepare(context.Background(), restore.PrepareConfig{Dir: dir, Recoverer: rec, Log: log})
		if err == nil || !strings.Contains(err.Error(), "redo log is corrupt") {
			t.Fatalf("err = %v", err)
		}
		if b, err := restore.Open(dir); err != nil || b.Prepared {
			t.Errorf("after a failed recovery the backup is prepared %v (%v), want it as it was", b != nil && b.Prepared, err)
		}
	})
	t.Run("incremental", func(t *testing.T) {
		dir := unpreparedBackup(t, files, true)
		rec := &fakePreparer{}
		err := restore.Prepare(context.Background(), restore.PrepareConfig{Dir: dir, Recoverer: rec, Log: log})
		if err == nil || !strings.Contains(err.Error(), "incremental") || len(rec.calls) > 0 {
			t.Errorf("prepare of an incremental: %v, calls %q; want it refused before any server is asked", err, rec.calls)
		}
	})
}
