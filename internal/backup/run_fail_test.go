package backup_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/backup/backuptest"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
)

// checkLeftIncomplete: a backup that failed left no manifest and its incomplete
// marker, and closed its session last.
func checkLeftIncomplete(t *testing.T, srv *backuptest.Server, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, manifest.FileName)); !os.IsNotExist(err) {
		t.Errorf("a failed backup has a manifest: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err != nil {
		t.Errorf("the incomplete marker is gone: %v", err)
	}
	if ev := srv.Events(); len(ev) == 0 || ev[len(ev)-1] != "close" {
		t.Errorf("the failed backup did %q: want its session closed last", ev)
	}
	checkReleased(t, srv)
}

// lastStage is the last stage the backup entered ("" if none).
func lastStage(ev []string) string {
	last := ""
	for _, e := range ev {
		if s, ok := strings.CutPrefix(e, "BACKUP STAGE "); ok {
			last = s
		}
	}
	return last
}

// TestRunCtrlC: a backup cancelled (Ctrl-C) during the data copy, under BLOCK_DDL (as
// it copies a .frm) and under BLOCK_COMMIT (as it copies a log table, after the end
// LSN is read) returns "backup interrupted", writes no manifest, leaves the incomplete
// marker, stops every redo copy, and leaves the lock sequence closed (the lock's Close
// seen after the last stage it entered, BACKUP STAGE END never entered).
func TestRunCtrlC(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, at, stage string // cancel as the copy of at starts, with stage the last one entered
	}{
		{"during the copy", "db/t.ibd", "START"},
		{"under BLOCK_DDL", "db/t.frm", "BLOCK_DDL"},
		{"under BLOCK_COMMIT", "mysql/general_log.CSV", "BLOCK_COMMIT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctrlCAt(t, c.at, c.stage)
		})
	}
}

// ctrlCAt cancels a backup of the fake server (with a log table in mysql/) as the
// copy of at starts, and checks it was interrupted with stage the last one entered.
func ctrlCAt(t *testing.T, at, stage string) {
	t.Helper()
	srv := backuptest.New(t)
	if err := os.MkdirAll(filepath.Join(srv.Datadir, "mysql"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srv.Datadir, "mysql", "general_log.CSV"), []byte("a log table\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, dir := runConfig(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	end := &onCreate{Sink: cfg.Sink, rel: at, do: cancel}
	cfg.Sink = end
	_, err := backup.Run(ctx, cfg)
	if !end.done {
		t.Fatalf("the backup never copied %s", at)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "backup interrupted; ") {
		t.Fatalf("Run returned %v, want it interrupted", err)
	}
	checkLeftIncomplete(t, srv, dir)
	ev := srv.Events()
	if got := lastStage(ev); got != stage {
		t.Fatalf("the last stage entered is %q, want %q: %q", got, stage, ev)
	}
	if i := slices.Index(ev, "unlock"); i < 0 || i < slices.Index(ev, "BACKUP STAGE "+stage) {
		t.Fatalf("the lock was not closed after %s: %q", stage, ev)
	}
}

// failingEnd is an end whose writes to one file fail; the copy of another file, wait,
// starts only once the backup has stopped its redo copies (it saw the failure).
type failingEnd struct {
	sink.Sink
	rel, wait string
	srv       *backuptest.Server
	err       error
}

func (e *failingEnd) Create(rel string, o sink.FileOptions) (sink.File, error) {
	if rel == e.wait {
		for deadline := time.Now().Add(5 * time.Second); e.srv.Running() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	f, err := e.Sink.Create(rel, o)
	if err != nil || rel != e.rel {
		return f, err
	}
	return failingFile{File: f, err: e.err}, nil
}

type failingFile struct {
	sink.File
	err error
}

func (f failingFile) WriteAt([]byte, int64) error { return f.err }

// TestRunEndFails: the end fails in the middle of the copy, writing a data file or the
// backup's redo log (drained by a goroutine of its own while the data copy runs: here
// the copy of db/t.ibd starts only after that failure). Run returns the end's error
// (not "interrupted"), writes no manifest, leaves the incomplete marker, never takes
// BLOCK_DDL, stops every redo copy and closes the lock sequence.
func TestRunEndFails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rel, wait, says string }{
		{"db/t.ibd", "", ""},
		{"ib_logfile0", "db/t.ibd", "write backup redo log"},
	} {
		t.Run(c.rel, func(t *testing.T) {
			t.Parallel()
			srv := backuptest.New(t)
			srv.Redo = bytes.Repeat([]byte("redo"), 1<<19) // 2 MiB: more than the drain buffers
			cfg, dir := runConfig(t, srv)
			errEnd := errors.New("the end's disk went away")
			cfg.Sink = &failingEnd{Sink: cfg.Sink, rel: c.rel, wait: c.wait, srv: srv, err: errEnd}
			_, err := backup.Run(context.Background(), cfg)
			if !errors.Is(err, errEnd) || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("Run returned %v, want the end's error, saying %q", err, c.says)
			}
			checkLeftIncomplete(t, srv, dir)
			if ev := srv.Events(); slices.Contains(ev, "BACKUP STAGE FLUSH") {
				t.Fatalf("the backup went on to the locks after its end failed: %q", ev)
			}
		})
	}
}
