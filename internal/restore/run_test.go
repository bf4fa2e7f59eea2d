package restore

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

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
)

// memSource is a fake source: it writes files into staging and returns an
// unprepared ferry backup of them, telling it before its data (inspect) or not (a
// stream). calls records what the restore asked of it and of the fake recoverer.
type memSource struct {
	inspect bool
	files   map[string]string
	calls   *[]string
	staging string
}

func (s *memSource) backup(dir string) *Backup {
	m := &manifest.Manifest{ID: "b1", Coordinates: mariadb.Coordinates{GTIDBinlogPos: "0-1-7"},
		Server: manifest.Server{Version: "10.11.19-MariaDB", Settings: map[string]string{}}}
	return &Backup{Dir: dir, Manifest: m, ServerVersion: m.Server.Version, Settings: m.Server.Settings, Source: "mem"}
}

func (s *memSource) Name() string { return "mem" }
func (s *memSource) Caps() Caps   { return Caps{Inspect: s.inspect} }
func (s *memSource) Inspect(context.Context) (*Backup, error) {
	*s.calls = append(*s.calls, "inspect")
	if !s.inspect {
		return nil, ErrNoInspect
	}
	return s.backup(""), nil
}

func (s *memSource) Staging(datadir string) (string, error) {
	*s.calls = append(*s.calls, "staging")
	dir, err := makeStaging(datadir, "")
	s.staging = dir
	return dir, err
}

func (s *memSource) Fill(_ context.Context, staging string, _ Env) (*Backup, error) {
	*s.calls = append(*s.calls, "fill")
	for p, body := range s.files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(staging, p)), 0o750); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(staging, p), []byte(body), 0o640); err != nil {
			return nil, err
		}
	}
	return s.backup(staging), nil
}

// fakeRecoverer stands for the server: its recovery writes a file into the copy (or
// fails with err).
type fakeRecoverer struct {
	calls *[]string
	jobs  []RecoverJob
	err   error
}

func (r *fakeRecoverer) Server(_ context.Context, b *Backup) (string, error) {
	if b == nil {
		*r.calls = append(*r.calls, "server?")
	} else {
		*r.calls = append(*r.calls, "server "+b.ServerVersion)
	}
	return "/fake/mariadbd", nil
}

func (r *fakeRecoverer) Recover(_ context.Context, job RecoverJob) error {
	*r.calls = append(*r.calls, "recover")
	r.jobs = append(r.jobs, job)
	if r.err != nil {
		return r.err
	}
	return os.WriteFile(filepath.Join(job.Dir, "aria_log_control"), []byte("recovered"), 0o640)
}

// TestRestoreRecoversThroughTheSeam drives Restore end to end from a fake source of
// each kind (one that tells its backup before the data, one that does not) with a
// fake recoverer, no server: the backup is checked before any data moves when the
// source can tell it, otherwise once filled; the copy is recovered once, in staging;
// the datadir appears only whole with what recovery wrote; a failed recovery leaves
// the datadir as it was and no staging directory.
func TestRestoreRecoversThroughTheSeam(t *testing.T) {
	files := map[string]string{"ibdata1": "system", "db/t.ibd": "pages", "ib_logfile0": "redo"}
	want := map[bool][]string{
		true:  {"inspect", "server 10.11.19-MariaDB", "staging", "fill", "recover"},
		false: {"server?", "staging", "fill", "server 10.11.19-MariaDB", "recover"},
	}
	for _, inspect := range []bool{true, false} {
		t.Run(map[bool]string{true: "inspected", false: "stream"}[inspect], func(t *testing.T) {
			t0 := time.Now()
			var calls []string
			src := &memSource{inspect: inspect, files: files, calls: &calls}
			rec := &fakeRecoverer{calls: &calls}
			datadir := filepath.Join(t.TempDir(), "data")
			res, err := Restore(context.Background(), runConfig(src, rec, datadir))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(calls, want[inspect]) {
				t.Errorf("calls %q, want %q", calls, want[inspect])
			}
			if len(rec.jobs) != 1 || rec.jobs[0].Dir != src.staging || rec.jobs[0].Force != 0 || rec.jobs[0].Bin != "/fake/mariadbd" {
				t.Errorf("recovery jobs %+v, want one on %s", rec.jobs, src.staging)
			}
			for p, body := range map[string]string{"ibdata1": "system", "db/t.ibd": "pages", "aria_log_control": "recovered"} {
				if b, err := os.ReadFile(filepath.Join(datadir, p)); err != nil || string(b) != body {
					t.Errorf("%s in the datadir: %q, %v; want %q", p, b, err, body)
				}
			}
			if _, err := os.Stat(src.staging); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("staging %s left: %v", src.staging, err)
			}
			if res.Coordinates.GTIDBinlogPos != "0-1-7" || res.Datadir != datadir {
				t.Errorf("result %+v", res)
			}
			if took := time.Since(t0); took > time.Second {
				t.Errorf("a restore without a server took %v", took)
			}
		})
	}
	t.Run("failed recovery", func(t *testing.T) {
		var calls []string
		src := &memSource{inspect: true, files: files, calls: &calls}
		rec := &fakeRecoverer{calls: &calls, err: errors.New("InnoDB: redo log is corrupt")}
		datadir := t.TempDir()
		if err := os.WriteFile(filepath.Join(datadir, "ibdata1"), []byte("old"), 0o640); err != nil {
			t.Fatal(err)
		}
		cfg := runConfig(src, rec, datadir)
		cfg.Replace = true
		_, err := Restore(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "redo log is corrupt") || !strings.Contains(err.Error(), "datadir left as it was") {
			t.Fatalf("err = %v", err)
		}
		ents, _ := os.ReadDir(datadir)
		if b, _ := os.ReadFile(filepath.Join(datadir, "ibdata1")); len(ents) != 1 || string(b) != "old" {
			t.Errorf("the datadir holds %d entries, ibdata1 %q; want it as it was", len(ents), b)
		}
		if _, err := os.Stat(src.staging); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staging %s left: %v", src.staging, err)
		}
	})
}

func runConfig(src Source, rec Recoverer, datadir string) Config {
	return Config{Source: src, Datadir: datadir, Recoverer: rec, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Progress: io.Discard}
}
