// Package backuptest is a fake server for unit tests of backup.Run, in the spirit of
// Vitess's fakemysqldaemon: it implements the backup's server seam (backup.Connector,
// backup.Server, backup.BackupLock, backup.RedoLog) over a temporary datadir that
// holds small InnoDB files a real MariaDB 10.11 wrote (internal/innodb/testdata, so
// their checksums are valid) and a few non-InnoDB files. Its redo copies write
// Server.Redo and run until the backup stops them; its lock sequence records the
// stages entered. With a *clock.Fake as Config.Clock, a whole backup runs in
// milliseconds and without a mariadbd.
package backuptest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// PageSize is the fake server's innodb_page_size.
const PageSize = 16384

// Server is the fake server. Set its fields before the backup starts.
type Server struct {
	// Datadir is the server's datadir: ibdata1, db/t.ibd, db/t.frm, db/log.CSV,
	// aria_log_control and an ib_logfile0 (read by no one: the redo copies are fake).
	Datadir string
	// Vars are the server variables the probe reports.
	Vars map[string]string
	// Checkpoint is the LSN of the server's newest checkpoint, where every redo copy
	// starts; End is its current LSN, read as the end LSN under BLOCK_COMMIT.
	Checkpoint, End uint64
	// Coordinates are the binlog and GTID position read with the end LSN.
	Coordinates mariadb.Coordinates
	// Redo is what a redo copy writes into the backup's ib_logfile0.
	Redo []byte
	// Changed are the pages the redo since the checkpoint names: every redo copy
	// that tracks pages (a three-stage tracker, an incremental's selection) sees them.
	Changed []redo.PageID
	// OnStage, if set, is called as each stage is entered, before it is recorded.
	OnStage func(ctx context.Context, s mariadb.Stage) error
	// Script scripts the redo copies in the order the backup opens them (copy.go):
	// where each starts, the pages it names, whether the server laps it. Past the
	// list, a copy starts at Checkpoint, names Changed and writes Redo.
	Script []Copy
	// OnOpen, if set, is called as redo copy n (0 the first) opens: the moment to
	// change the datadir between the data copy and a re-copy round.
	OnOpen func(n int)

	mu      sync.Mutex
	events  []string
	copies  int
	running []*redoCopy // redo copies whose Run has not returned
	lock    lockState
}

// New returns a fake server whose datadir is a new temporary directory.
func New(t testing.TB) *Server {
	t.Helper()
	dd := t.TempDir()
	files := map[string][]byte{
		"ibdata1":          testdb.PageFixture(t, "ibdata1.pages.gz"),
		"db/t.ibd":         testdb.PageFixture(t, "fcrc32.after.gz"),
		"db/t.frm":         []byte("a table definition\n"),
		"db/log.CSV":       []byte("1,\"a row of a CSV table\"\n"),
		"aria_log_control": []byte("aria control file\n"),
		"ib_logfile0":      make([]byte, 4*PageSize),
	}
	for rel, b := range files {
		p := filepath.Join(dd, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return &Server{
		Datadir: dd,
		Vars: map[string]string{"datadir": dd, "innodb_page_size": strconv.Itoa(PageSize),
			"innodb_data_file_path": "ibdata1:12M:autoextend", "innodb_undo_tablespaces": "0",
			"innodb_log_file_size": strconv.Itoa(64 << 20), "innodb_checksum_algorithm": "full_crc32",
			"server_uid": "fake-server-uid", "server_id": "1", "version_comment": "fake MariaDB",
			"innodb_encrypt_log": "OFF", "lower_case_table_names": "0"},
		Checkpoint:  100000,
		End:         123456,
		Coordinates: mariadb.Coordinates{BinlogFile: "bin.000001", BinlogPos: 4242, GTIDBinlogPos: "0-1-42"},
		Redo:        []byte("the redo of the copy, as the fake redo copy wrote it\n"),
	}
}

// Events lists what the backup did on the server, in order: "connect", each stage
// entered ("BACKUP STAGE START", ...), "read end", "pause replica" and "resume
// replica" (--safe-slave-backup), "unlock", "close".
func (s *Server) Events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// Copies is how many redo copies the backup opened.
func (s *Server) Copies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copies
}

func (s *Server) event(e string) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

var (
	_ backup.Connector  = (*Server)(nil)
	_ backup.Server     = session{}
	_ backup.BackupLock = (*lock)(nil)
	_ backup.RedoLog    = session{}
)

// Connect implements backup.Connector.
func (s *Server) Connect(context.Context) (backup.Server, error) {
	s.event("connect")
	return session{s}, nil
}

// Counters implements backup.Connector: the fake server writes nothing.
func (s *Server) Counters(context.Context) (backup.WriteCounter, error) { return counter{}, nil }

type counter struct{}

func (counter) Writes(context.Context) (int64, error)     { return 0, nil }
func (counter) RedoBytes(context.Context) (uint64, error) { return 0, nil }
func (counter) Close() error                              { return nil }

// session is one session on the fake server.
type session struct{ s *Server }

func (c session) Info() mariadb.Info {
	return mariadb.Info{Version: "10.11.9-MariaDB", Major: 10, Minor: 11, Patch: 9, Vars: c.s.Vars,
		Datadir: c.s.Datadir, PageSize: PageSize}
}

func (c session) LSNs(context.Context) (flushed, current uint64, err error) {
	end := c.s.end()
	return end, end, nil
}

func (c session) ReplicaSources(context.Context) ([]mariadb.ReplicaSource, error) { return nil, nil }

// PauseReplica implements backup.Server: the fake server is not a replica.
func (c session) PauseReplica(context.Context, time.Duration) (backup.ReplicaPause, error) {
	c.s.event("pause replica")
	return pause(c), nil
}

// pause is a replica's SQL thread the fake never stops; it records its resume.
type pause struct{ s *Server }

func (pause) Stopped() bool { return false }

func (p pause) Resume(context.Context) error {
	p.s.event("resume replica")
	return nil
}

func (c session) BackupLock(ctx context.Context) (backup.BackupLock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &lock{s: c.s}, nil
}

func (c session) Redo() backup.RedoLog { return c }

// Layout implements backup.Server: the fake lays its files out as MariaDB does.
func (c session) Layout() backup.Layout { return backup.MariaDBLayout() }

// Path implements backup.RedoLog: MariaDB's ib_logfile0 in the fake's datadir.
func (c session) Path() string { return backup.MariaDBRedo(c.Info()).Path() }

// Stored implements backup.RedoLog.
func (c session) Stored() string { return "ib_logfile0" }

// Parsed implements backup.RedoLog: the fake's redo copy reports pages and file
// operations as internal/redo's does.
func (c session) Parsed() bool { return true }

// Capacity implements backup.RedoLog.
func (c session) Capacity() uint64 { return backup.MariaDBRedo(c.Info()).Capacity() }

func (c session) Close() error { c.s.event("close"); return nil }

// lock is the fake's stage sequence.
type lock struct {
	s     *Server
	stage mariadb.Stage
}

// Enter fails, as a statement on a real server does, once ctx is done.
func (l *lock) Enter(ctx context.Context, st mariadb.Stage) (time.Duration, error) {
	if l.s.OnStage != nil {
		if err := l.s.OnStage(ctx, st); err != nil {
			return 0, err
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.stage = st
	l.s.mu.Lock()
	l.s.lock.entered(st)
	l.s.mu.Unlock()
	l.s.event("BACKUP STAGE " + string(st))
	return 0, nil
}

func (l *lock) ReadEnd(ctx context.Context) (uint64, mariadb.Coordinates, error) {
	if err := ctx.Err(); err != nil {
		return 0, mariadb.Coordinates{}, err
	}
	l.s.event("read end")
	return l.s.end(), l.s.Coordinates, nil
}

// Close ends the sequence if it is still inside it, as the real lock's does.
func (l *lock) Close() error {
	l.s.mu.Lock()
	l.s.lock.closed = true
	l.s.mu.Unlock()
	l.s.event("unlock")
	return nil
}

// lockState is what the fake's lock sequence went through.
type lockState struct {
	started, ended, closed bool
}

func (ls *lockState) entered(st mariadb.Stage) {
	switch st {
	case mariadb.StageStart:
		ls.started = true
	case mariadb.StageEnd:
		ls.ended = true
	}
}

// LockHeld tells whether the backup left the lock sequence open: started, and
// neither ended (BACKUP STAGE END) nor closed. A backup that returned, whether it
// failed or not, must leave it false.
func (s *Server) LockHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lock.started && !s.lock.ended && !s.lock.closed
}

// end is the server's current LSN.
func (s *Server) end() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.End
}
