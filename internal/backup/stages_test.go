package backup

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/redo"
)

// fakeLock is a server's stage sequence: it records the stages entered and, when the
// sequence ends (commits resume), where the redo copy was told to stop.
type fakeLock struct {
	end           uint64
	coords        mariadb.Coordinates
	redo          *fakeRedo
	stages        []mariadb.Stage
	stopAtRelease uint64
}

func (l *fakeLock) Enter(_ context.Context, s mariadb.Stage) (time.Duration, error) {
	l.stages = append(l.stages, s)
	if s == mariadb.StageEnd {
		l.stopAtRelease = l.redo.stop
	}
	return 0, nil
}

func (l *fakeLock) ReadEnd(context.Context) (uint64, mariadb.Coordinates, error) {
	return l.end, l.coords, nil
}

// quietProgress is a progress reporter that shows nothing.
func quietProgress(t *testing.T) *progress.Reporter {
	p := progress.New(progress.Options{Out: io.Discard, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Every: time.Hour})
	t.Cleanup(p.Finish)
	return p
}

// fakeRedo is a redo copy that records StopAt.
type fakeRedo struct{ stop uint64 }

func (r *fakeRedo) Run(context.Context) error                { return nil }
func (r *fakeRedo) StopAt(lsn uint64)                        { r.stop = lsn }
func (r *fakeRedo) Copied() uint64                           { return 0 }
func (r *fakeRedo) WaitCopied(context.Context, uint64) error { return nil }
func (r *fakeRedo) Start() redo.Checkpoint                   { return redo.Checkpoint{} }
func (r *fakeRedo) EndLSN() uint64                           { return r.stop }

// TestRedoCopyStopsBeforeCommitsResume: the redo copy is told its stop LSN while
// BLOCK_COMMIT still holds. Set after BACKUP STAGE END, the tailer could copy commits
// made after the binlog position was read, and the restored data would run past the
// backup's GTID (a replica then fails on a duplicate key, as CI once showed).
func TestRedoCopyStopsBeforeCommitsResume(t *testing.T) {
	r := &fakeRedo{}
	l := &fakeLock{end: 987654, coords: mariadb.Coordinates{GTIDBinlogPos: "0-1-731"}, redo: r}
	j := &job{lock: l, tail: &tailer{t: r}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		info: mariadb.Info{Datadir: t.TempDir(), PageSize: 16384, Vars: map[string]string{}},
		cfg:  Config{Parallel: 1}, aria: map[string]*openCopy{}, prog: quietProgress(t)}
	if _, err := j.underBlockCommit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []mariadb.Stage{mariadb.StageBlockCommit, mariadb.StageEnd}; len(l.stages) != 2 || l.stages[0] != want[0] || l.stages[1] != want[1] {
		t.Fatalf("stages entered: %v, want %v", l.stages, want)
	}
	if l.stopAtRelease != l.end {
		t.Fatalf("when BLOCK_COMMIT was released the redo copy's stop was %d, want the end LSN %d", l.stopAtRelease, l.end)
	}
	if j.m.EndLSN != l.end || j.m.Coordinates.GTIDBinlogPos != "0-1-731" {
		t.Fatalf("manifest end %d %+v, want %d and the coordinates read with it", j.m.EndLSN, j.m.Coordinates, l.end)
	}
}
