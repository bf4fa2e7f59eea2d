package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/clock"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/spool"
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
	j := &job{lock: l, clock: clock.Real{}, tail: &tailer{t: r}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
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

// slowEnd is an end that is not Direct; it records how many files were created in it
// and how many bytes written while the lock held.
type slowEnd struct {
	sink.Sink
	mu      sync.Mutex
	created int
	bytes   int64
}

func (s *slowEnd) Caps() sink.Caps {
	c := s.Sink.Caps()
	c.Direct, c.Remote = false, true
	return c
}

func (s *slowEnd) Create(rel string, o sink.FileOptions) (sink.File, error) {
	s.mu.Lock()
	s.created++
	s.mu.Unlock()
	f, err := s.Sink.Create(rel, o)
	return countedFile{f, s}, err
}

type countedFile struct {
	sink.File
	s *slowEnd
}

func (f countedFile) WriteAt(p []byte, off int64) error {
	f.s.mu.Lock()
	f.s.bytes += int64(len(p))
	f.s.mu.Unlock()
	return f.File.WriteAt(p, off)
}

// endAtRelease is a fakeLock that notes what the end had received when the locks
// were released.
type endAtRelease struct {
	fakeLock
	end             *slowEnd
	created, writes int64
}

func (l *endAtRelease) Enter(ctx context.Context, s mariadb.Stage) (time.Duration, error) {
	if s == mariadb.StageEnd {
		l.end.mu.Lock()
		l.created, l.writes = int64(l.end.created), l.end.bytes
		l.end.mu.Unlock()
	}
	return l.fakeLock.Enter(ctx, s)
}

// TestLockCopiesGoToTheSpool: on an end that is not Direct (a stream, a repository),
// the non-InnoDB files and Aria logs copied under BLOCK_DDL and BLOCK_COMMIT reach the
// end only once the locks are released (a slow link made every commit wait on them),
// and then whole. A spool bound that cannot hold them refuses the backup before the
// first lock, naming the spool limit; a file that outgrew the bound since goes straight to
// the end, whole too.
func TestLockCopiesGoToTheSpool(t *testing.T) {
	files := map[string][]byte{"db/t.MYD": rnd(3 << 20), "db/t.frm": rnd(900), "mysql/general_log.CSV": rnd(70 << 10), "aria_log.00000001": rnd(5<<20 + 8192)}
	t.Run("spooled", func(t *testing.T) {
		s := newLockStages(t, files)
		room, err := s.j.lockSpoolRoom(s.p)
		if err != nil {
			t.Fatal(err)
		}
		s.run(t, room)
		if s.l.created != 0 || s.l.writes != 0 {
			t.Fatalf("the end got %d files, %d bytes while the locks were held", s.l.created, s.l.writes)
		}
		s.j.spoolLimit = 1 << 20
		if _, err := s.j.lockSpoolRoom(s.p); err == nil || !strings.Contains(err.Error(), setting.MaxSpool.String()) {
			t.Fatalf("a spool bound too small for the copies under the locks: %v", err)
		}
	})
	t.Run("outgrown", func(t *testing.T) {
		s := newLockStages(t, files)
		s.run(t, 1<<20) // room for the small files only
		if s.l.created != 2 || s.l.writes != int64(len(files["db/t.MYD"])+len(files["aria_log.00000001"])) {
			t.Fatalf("the end got %d files, %d bytes under the locks; want the two that do not fit the spool", s.l.created, s.l.writes)
		}
	})
}

// lockStages is a job over a datadir of non-InnoDB files, backing up into a directory
// seen as an end that is not Direct.
type lockStages struct {
	j     *job
	l     *endAtRelease
	p     plan
	out   string
	files map[string][]byte
}

func newLockStages(t *testing.T, files map[string][]byte) *lockStages {
	datadir, out := t.TempDir(), t.TempDir()
	for rel, b := range files {
		os.MkdirAll(filepath.Join(datadir, filepath.Dir(rel)), 0o750)
		if err := os.WriteFile(filepath.Join(datadir, rel), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := sink.NewDir(filepath.Join(out, "bk"))
	if err != nil {
		t.Fatal(err)
	}
	dir.Open(context.Background(), "x")
	end := &slowEnd{Sink: dir}
	r := &fakeRedo{}
	l := &endAtRelease{fakeLock: fakeLock{end: 5, redo: r}, end: end}
	j := &job{lock: l, clock: clock.Real{}, tail: &tailer{t: r, spool: spool.New(spool.Options{})}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), sink: end,
		info: mariadb.Info{Datadir: datadir, PageSize: 16384, Vars: map[string]string{}}, spoolLimit: 1 << 30,
		cfg: Config{Parallel: 2, Spool: SpoolOptions{Dir: t.TempDir()}}, aria: map[string]*openCopy{}, prog: quietProgress(t),
		files: map[string]copiedFile{}, sent: sink.Sent{}, bufs: make(chan []byte, 2)}
	j.bufs <- make([]byte, 1<<20)
	j.bufs <- make([]byte, 1<<20)
	p, err := j.scan()
	if err != nil {
		t.Fatal(err)
	}
	return &lockStages{j: j, l: l, p: p, out: out, files: files}
}

// run copies what BLOCK_DDL and BLOCK_COMMIT copy, with a lock spool of room bytes,
// stores the spool, and checks that every file is stored whole.
func (s *lockStages) run(t *testing.T, room int64) {
	t.Helper()
	j := s.j
	j.startLockSpool(room)
	if err := j.copyOthers(context.Background(), s.p.DDLStable); err != nil {
		t.Fatal(err)
	}
	if err := j.copyAriaHeads(context.Background(), s.p.AriaLogs); err != nil {
		t.Fatal(err)
	}
	if _, err := j.underBlockCommit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.storeLockSpool(context.Background()); err != nil {
		t.Fatal(err)
	}
	for rel, want := range s.files {
		got, err := os.ReadFile(filepath.Join(s.out, "bk", rel))
		if err != nil || !bytes.Equal(got, want) || j.files[rel].Size != int64(len(want)) {
			t.Fatalf("%s stored: %d bytes of %d, recorded %d (%v)", rel, len(got), len(want), j.files[rel].Size, err)
		}
	}
}

func rnd(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
