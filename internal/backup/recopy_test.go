package backup

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/clock"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// far is a checkpoint distance that makes a first re-copy round worth it.
const far = 4 * keepTarget

// fakeCopy is one redo copy of the fake server: it starts at its checkpoint, "sees"
// the pages it is given, has copied kept bytes, and runs until stopped (or fails at
// once with err, e.g. lapped).
type fakeCopy struct {
	start, kept uint64
	pages       []uint32
	err         error
	stop        chan struct{}
	once        sync.Once
}

func (f *fakeCopy) Run(ctx context.Context) error {
	if f.err != nil {
		return f.err
	}
	select {
	case <-f.stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (f *fakeCopy) StopAt(uint64)                            { f.once.Do(func() { close(f.stop) }) }
func (f *fakeCopy) Copied() uint64                           { return f.start + f.kept }
func (f *fakeCopy) WaitCopied(context.Context, uint64) error { return nil }
func (f *fakeCopy) Start() redo.Checkpoint                   { return redo.Checkpoint{LSN: f.start} }
func (f *fakeCopy) EndLSN() uint64                           { return f.start + f.kept }

// fakeRedoServer hands out its copies in order, each recording its pages of space.
type fakeRedoServer struct {
	space  uint32
	copies []*fakeCopy
	opened int
	polled int
}

func (s *fakeRedoServer) open(cfg redo.Config) (RedoCopy, error) {
	c := s.copies[s.opened]
	s.opened++
	c.stop = make(chan struct{})
	for _, p := range c.pages {
		cfg.Pages.Add(redo.PageID{Space: s.space, Page: p})
	}
	return c, nil
}

// threeStageSetup is a server datadir holding db/t.ibd (pages 0-3 of a real full_crc32
// tablespace), a directory backup whose copy of it has an older page 3 (copied before
// an UPDATE), and a job between them whose redo copies are the fake's.
type threeStageSetup struct {
	j           *job
	clock       *clock.Fake // the job's clock, at the copy's start until a test moves it
	now, stale  []byte
	copyPath    string
	oldPage3LSN uint64
	fail        context.CancelCauseFunc
	ctx         context.Context
	logs        *bytes.Buffer
	redo        *fakeRedoServer
	pageSize    int
}

func newThreeStage(t *testing.T, copies ...*fakeCopy) *threeStageSetup {
	const ps = 16384
	now, before := testdb.PageFixture(t, "fcrc32.after.gz"), testdb.PageFixture(t, "fcrc32.before.gz")
	stale := append(append([]byte{}, now[:3*ps]...), before[:ps]...)
	dd := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dd, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dd, "db", "t.ibd"), now, 0o644); err != nil {
		t.Fatal(err)
	}
	bk := filepath.Join(t.TempDir(), "bk")
	d, err := sink.NewDir(bk)
	if err != nil {
		t.Fatal(err)
	}
	ctx, fail := context.WithCancelCause(context.Background())
	t.Cleanup(func() { fail(nil) })
	if err := d.Open(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(bk, "db", "t.ibd")
	os.MkdirAll(filepath.Dir(copyPath), 0o750)
	if err := os.WriteFile(copyPath, stale, 0o640); err != nil {
		t.Fatal(err)
	}
	space := binary.BigEndian.Uint32(now[34:])
	srv := &fakeRedoServer{space: space, copies: copies}
	logs := new(bytes.Buffer)
	clk := clock.NewFake(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	j := &job{cfg: Config{Parallel: 2}, log: slog.New(slog.NewTextHandler(logs, nil)), sink: d, clock: clk, copyStart: clk.Now(), prog: quietProgress(t),
		openRedo: srv.open, checkpoint: srv.checkpoint, lock: countingLock{},
		info: mariadb.Info{Datadir: dd, PageSize: ps, Vars: map[string]string{}},
		files: map[string]copiedFile{"db/t.ibd": {Rel: "db/t.ibd", Size: int64(len(stale)), CRC: checksum.Sum(stale),
			SpaceID: space, Known: true, Kind: manifest.KindInnoDB}},
		sent: sink.Sent{}, aria: map[string]*openCopy{}}
	t.Cleanup(j.releaseTail)
	return &threeStageSetup{j: j, clock: clk, now: now, stale: stale, copyPath: copyPath, fail: fail, ctx: ctx, logs: logs, redo: srv,
		oldPage3LSN: binary.BigEndian.Uint64(before[16:]), pageSize: ps}
}

// countingLock is a stage lock; the three-stage copy never enters a stage.
type countingLock struct{}

func (countingLock) Enter(context.Context, mariadb.Stage) (time.Duration, error) { return 0, nil }
func (countingLock) ReadEnd(context.Context) (uint64, mariadb.Coordinates, error) {
	return 0, mariadb.Coordinates{}, nil
}

// checkpoint is the server's newest checkpoint: where the next copy will start.
func (s *fakeRedoServer) checkpoint() (uint64, error) {
	s.polled++
	if s.opened < len(s.copies) {
		return s.copies[s.opened].start, nil
	}
	return s.copies[len(s.copies)-1].start, nil
}

// run opens the tracker and runs the rounds.
func (s *threeStageSetup) run(t *testing.T) { t.Helper(); s.runAs(t, tailTracker) }

// runAs opens a tracker of the given kind and runs the rounds.
func (s *threeStageSetup) runAs(t *testing.T, kind tailKind) {
	t.Helper()
	if _, err := s.j.openTail(s.ctx, s.fail, kind); err != nil {
		t.Fatal(err)
	}
	if err := s.j.threeStage(s.ctx, s.fail); err != nil {
		t.Fatal(err)
	}
	if err := context.Cause(s.ctx); err != nil {
		t.Fatalf("the job failed: %v", err)
	}
}

// checkCopy: the copy holds want, and the job's size and CRC-32C of it are its own.
func (s *threeStageSetup) checkCopy(t *testing.T, want []byte, what string) {
	t.Helper()
	got, err := os.ReadFile(s.copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the copy is not %s", what)
	}
	f := s.j.files["db/t.ibd"]
	if f.Size != int64(len(got)) || f.CRC != checksum.Sum(got) {
		t.Fatalf("recorded size %d CRC %08x, the copy has %d, %08x", f.Size, f.CRC, len(got), checksum.Sum(got))
	}
}

// TestThreeStageOneRound: the tracker saw page 3 change; after one checkpoint the copy
// of page 3 is read again and patched in place, the copy equals the server's file, its
// CRC-32C is kept without reading the copy, and the round's redo copy is the backup's.
func TestThreeStageOneRound(t *testing.T) {
	s := newThreeStage(t, &fakeCopy{start: 100, pages: []uint32{3}}, &fakeCopy{start: 100 + far, kept: 1 << 20})
	s.run(t)
	s.checkCopy(t, s.now, "the server's file")
	if s.j.recopy.rounds != 1 || s.j.recopy.pages != 1 || s.redo.opened != 2 {
		t.Fatalf("rounds %d, pages %d, copies opened %d; want 1, 1, 2", s.j.recopy.rounds, s.j.recopy.pages, s.redo.opened)
	}
	if s.j.tail == nil || s.j.tail.t.Start().LSN != 100+far {
		t.Fatal("the backup does not keep the redo copy that starts at the round's checkpoint")
	}
}

// TestThreeStageRounds: rounds go on while the server's checkpoint moves on by more
// than keepTarget after a round and the rounds shrink, up to maxRounds; they stop as
// soon as a round copies fewer pages than changed during it, or the checkpoint stays
// close.
func TestThreeStageRounds(t *testing.T) {
	big := uint64(keepTarget + 1)
	for _, c := range []struct {
		name   string
		copies []*fakeCopy
		rounds int
		pages  int64
	}{
		{"shrinking to the bound", []*fakeCopy{{start: 1, pages: []uint32{0, 1, 2, 3}}, {start: far, pages: []uint32{3}},
			{start: far + big}, {start: far + 2*big}}, 3, 5},
		{"shrinking too little", []*fakeCopy{{start: 1, pages: []uint32{1, 2, 3}}, {start: far, pages: []uint32{2, 3}},
			{start: far + big}}, 1, 3},
		{"not shrinking", []*fakeCopy{{start: 1, pages: []uint32{3}}, {start: far, pages: []uint32{1, 2, 3}},
			{start: far + big}}, 1, 1},
		{"checkpoint close", []*fakeCopy{{start: 1, pages: []uint32{1, 2, 3}}, {start: far, pages: []uint32{3}},
			{start: far + keepTarget - 1}}, 1, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newThreeStage(t, c.copies...)
			s.run(t)
			s.checkCopy(t, s.now, "the server's file")
			if s.j.recopy.rounds != c.rounds || s.j.recopy.pages != c.pages || s.redo.opened != c.rounds+1 {
				t.Fatalf("rounds %d, pages %d, copies opened %d; want %d, %d, %d", s.j.recopy.rounds, s.j.recopy.pages, s.redo.opened, c.rounds, c.pages, c.rounds+1)
			}
			if last := c.copies[c.rounds]; s.j.tail == nil || s.j.tail.t != last {
				t.Fatal("the backup does not keep the last round's redo copy")
			}
		})
	}
}

// TestThreeStageLappedTracker: a tracker lapped by the server does not fail the backup;
// the round reads every page and patches the runs holding a page newer than the
// copy's start (here page 3), and says so. With the start above every page's LSN,
// nothing is patched: the filter is the page LSN, not the read.
func TestThreeStageLappedTracker(t *testing.T) {
	lapped := &redo.OverwrittenError{Copied: 1, Server: 99, Capacity: 10}
	s := newThreeStage(t)
	s.redo.copies = []*fakeCopy{{start: s.oldPage3LSN, err: lapped}, {start: s.oldPage3LSN + far, kept: 1 << 20}}
	s.run(t)
	s.checkCopy(t, s.now, "the server's file")
	if !strings.Contains(s.logs.String(), "overwrote redo the page tracker had not read") {
		t.Fatalf("the fallback is not logged:\n%s", s.logs)
	}
	if s.j.recopy.rounds != 1 || s.j.recopy.pages == 0 {
		t.Fatalf("rounds %d, pages %d", s.j.recopy.rounds, s.j.recopy.pages)
	}

	var newest uint64
	for off := 0; off < len(s.now); off += s.pageSize {
		newest = max(newest, binary.BigEndian.Uint64(s.now[off+16:]))
	}
	s = newThreeStage(t)
	s.redo.copies = []*fakeCopy{{start: newest, err: lapped}, {start: newest + far, kept: 1 << 20}}
	s.run(t)
	s.checkCopy(t, s.stale, "left as it was (no page is newer than the start)")
}

// TestThreeStageFileGrew: the server extended the file (page 0 says so, the new pages
// are not initialized yet); the re-copy makes the copy as long as the file, as
// recovery requires, with the new pages zero.
func TestThreeStageFileGrew(t *testing.T) {
	s := newThreeStage(t, &fakeCopy{start: 100, pages: []uint32{3}}, &fakeCopy{start: 100 + far, kept: 1 << 20})
	grown := append(append([]byte{}, s.now...), make([]byte, 4*s.pageSize)...)
	if err := os.WriteFile(filepath.Join(s.j.info.Datadir, "db", "t.ibd"), grown, 0o644); err != nil {
		t.Fatal(err)
	}
	s.run(t)
	s.checkCopy(t, grown, "as long as the server's file")
}

// TestRecopyLostSpace: a file that is gone, or that holds another tablespace by the
// time the re-copy opens it (DDL between listing and reading), is not read: its space
// is marked lost, so that the DDL reconciliation copies it whole.
func TestRecopyLostSpace(t *testing.T) {
	s := newThreeStage(t)
	want := binary.BigEndian.Uint32(s.now[34:])
	other := filepath.Join(s.j.info.Datadir, "db", "other.ibd")
	if err := os.WriteFile(other, testdb.PageFixture(t, "crc32.after.gz"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{other, filepath.Join(s.j.info.Datadir, "db", "gone.ibd")} {
		s.j.lostSpaces = nil
		ij, in, err := s.j.openRecopy(recopyFile{src: srcFile{Abs: path, Rel: "db/t.ibd"}, copy: "db/t.ibd", space: want})
		if err != nil || in != nil || ij != nil || !s.j.lostSpaces[want] {
			t.Fatalf("%s: openRecopy = %v, %v, %v; lost %v", path, ij, in, err, s.j.lostSpaces)
		}
	}
	ij, in, err := s.j.openRecopy(recopyFile{src: srcFile{Abs: filepath.Join(s.j.info.Datadir, "db", "t.ibd"), Rel: "db/t.ibd"}, copy: "db/t.ibd", space: want})
	if err != nil || in == nil || ij.header.SpaceID != want {
		t.Fatalf("the tablespace's own file: %v, %v", in, err)
	}
	in.Close()
}

// TestThreeStageSkipped: when copying the changed pages again would keep about as much
// redo as it drops (a checkpoint that barely moved, a busy server, many pages), there is
// no round: the tracker's redo, kept from the start, stays the backup's.
func TestThreeStageSkipped(t *testing.T) {
	tracker := &fakeCopy{start: 100, kept: 1 << 40, pages: []uint32{0, 1, 2, 3}}
	s := newThreeStage(t, tracker, &fakeCopy{start: 100 + keepTarget/2})
	s.run(t)
	s.checkCopy(t, s.stale, "left as it was")
	if s.j.recopy.rounds != 0 || s.redo.opened != 1 || s.j.tail == nil || s.j.tail.t != tracker {
		t.Fatalf("rounds %d, copies opened %d: the tracker should stay the backup's redo copy", s.j.recopy.rounds, s.redo.opened)
	}
	if !strings.Contains(s.logs.String(), "three-stage copy skipped") {
		t.Fatalf("the skip is not logged:\n%s", s.logs)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(s.copyPath)), "ib_logfile0")); err != nil {
		t.Fatalf("the backup's ib_logfile0: %v", err)
	}
}

// redoEnd records what a remote end saw of the backup's redo: every ib_logfile0
// created and removed.
type redoEnd struct {
	sink.Sink
	created, removed int
}

func (r *redoEnd) Create(rel string, o sink.FileOptions) (sink.File, error) {
	if rel == "ib_logfile0" {
		r.created++
	}
	return r.Sink.Create(rel, o)
}

func (r *redoEnd) Remove(rel string) error {
	if rel == "ib_logfile0" {
		r.removed++
	}
	return r.Sink.Remove(rel)
}

// TestThreeStageHeldTracker: for a remote end, the tracker only spools. When a round
// runs, the end never sees the tracker's redo (one ib_logfile0, the round's, nothing
// sent and removed); when the round is skipped, the held tracker's whole redo becomes
// the backup's.
func TestThreeStageHeldTracker(t *testing.T) {
	t.Run("round", func(t *testing.T) {
		s := newThreeStage(t, &fakeCopy{start: 100, pages: []uint32{3}}, &fakeCopy{start: 100 + far, kept: 1 << 20})
		end := &redoEnd{Sink: s.j.sink}
		s.j.sink = end
		s.runAs(t, tailHeld)
		s.checkCopy(t, s.now, "the server's file")
		if end.created != 1 || end.removed != 0 || s.j.tail == nil || s.j.tail.t.Start().LSN != 100+far {
			t.Fatalf("ib_logfile0 created %d times, removed %d: the end carried the held tracker's redo", end.created, end.removed)
		}
	})
	t.Run("skipped", func(t *testing.T) {
		tracker := &fakeCopy{start: 100, kept: 1 << 40, pages: []uint32{0, 1, 2, 3}}
		s := newThreeStage(t, tracker, &fakeCopy{start: 100 + keepTarget/2})
		end := &redoEnd{Sink: s.j.sink}
		s.j.sink = end
		s.runAs(t, tailHeld)
		if end.created != 1 || s.j.tail == nil || s.j.tail.t != tracker || !s.j.tail.draining {
			t.Fatalf("ib_logfile0 created %d times: the skipped round did not keep the held tracker's redo", end.created)
		}
	})
}

// TestRecopyEstimate: a first round runs only if the redo it drops (copy start to the
// server's newest checkpoint) is more than twice the redo the server writes while the
// round reads the changed pages again, at the copy's read rate or --max-rate if lower.
func TestRecopyEstimate(t *testing.T) {
	const gib, mib = 1 << 30, 1 << 20
	// 10 GiB copied in 10 s while the server wrote 100 MiB/s; 1 GiB of pages changed:
	// a round reads them in 1 s and keeps about 100 MiB of redo.
	base := recopyEstimate{elapsed: 10 * time.Second, copied: 10 * gib, changed: gib, redo: 1000 * mib}
	for _, c := range []struct {
		name    string
		e       func(e recopyEstimate) recopyEstimate
		cost    int64
		pays    bool
		because string
	}{
		{"drops ten times what it keeps", func(e recopyEstimate) recopyEstimate { e.dropped = 1000 * mib; return e }, 100 * mib, true, ""},
		{"drops just over twice", func(e recopyEstimate) recopyEstimate { e.dropped = 200*mib + 1; return e }, 100 * mib, true, ""},
		{"drops twice", func(e recopyEstimate) recopyEstimate { e.dropped = 200 * mib; return e }, 100 * mib, false, "about as much redo"},
		{"--max-rate slows the round", func(e recopyEstimate) recopyEstimate { e.dropped, e.maxRate = 1000*mib, 100*mib; return e },
			1024 * mib, false, "about as much redo"},
		{"--max-rate above the copy's rate", func(e recopyEstimate) recopyEstimate { e.dropped, e.maxRate = 1000*mib, 10*gib; return e },
			100 * mib, true, ""},
		{"checkpoint barely moved", func(e recopyEstimate) recopyEstimate { e.dropped, e.changed = keepTarget, 0; return e }, 0, false, "hardly moved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := c.e(base)
			pays, why := e.pays()
			if got := e.cost(); got != c.cost || pays != c.pays || !strings.Contains(why, c.because) {
				t.Fatalf("cost %d, pays %v (%q); want %d, %v (%q)", got, pays, why, c.cost, c.pays, c.because)
			}
		})
	}
}

// TestThreeStageDecisionOnClock: the same copy decided at two moments of the job's
// clock. With --max-rate capping a round's reads, a copy that took 1 s keeps more redo
// while a round re-reads than it drops (skipped); one that took 100 s, reading below the
// cap, has a round that pays.
func TestThreeStageDecisionOnClock(t *testing.T) {
	for _, c := range []struct {
		elapsed time.Duration
		rounds  int
	}{{time.Second, 0}, {100 * time.Second, 1}} {
		t.Run(c.elapsed.String(), func(t *testing.T) {
			s := newThreeStage(t, &fakeCopy{start: 100, kept: 16 << 20, pages: []uint32{0, 1, 2, 3}}, &fakeCopy{start: 100 + far, kept: 1 << 20})
			s.j.cfg.MaxRate = int64(s.pageSize) // 4 s to read the 4 changed pages again
			s.clock.Advance(c.elapsed)
			s.run(t)
			if s.j.recopy.rounds != c.rounds {
				t.Fatalf("rounds %d, want %d:\n%s", s.j.recopy.rounds, c.rounds, s.logs)
			}
		})
	}
}
