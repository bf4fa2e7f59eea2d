package restore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/mariadb"
)

// fakeReplica is a database/sql connector standing for the replica of the replay's
// private server: it records each statement; SHOW SLAVE STATUS shows its applier at
// until (or stopped with sqlErr), running until STOP SLAVE.
type fakeReplica struct {
	mu      sync.Mutex
	stmts   []string
	stopped bool
	until   binlog.Position
	sqlErr  string
}

func (r *fakeReplica) Connect(context.Context) (driver.Conn, error) { return replicaConn{r}, nil }
func (r *fakeReplica) Driver() driver.Driver                        { return nil }

type replicaConn struct{ r *fakeReplica }

func (replicaConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("fake: no prepare") }
func (replicaConn) Close() error                        { return nil }
func (replicaConn) Begin() (driver.Tx, error)           { return nil, errors.New("fake: no transactions") }

func (c replicaConn) ExecContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Result, error) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.stmts = append(c.r.stmts, q)
	if strings.HasPrefix(q, "STOP SLAVE") {
		c.r.stopped = true
	}
	return driver.RowsAffected(0), nil
}

func (c replicaConn) QueryContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Rows, error) {
	if q != "SHOW SLAVE STATUS" {
		return nil, errors.New("fake: " + q)
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	running, errno := "Yes", "0"
	if c.r.stopped || c.r.sqlErr != "" {
		running = "No"
	}
	if c.r.sqlErr != "" {
		errno = "1062"
	}
	return &statusRows{vals: []driver.Value{running, errno, c.r.sqlErr, c.r.until.File, strconv.FormatInt(c.r.until.Pos, 10)}}, nil
}

// statusRows is one row of SHOW SLAVE STATUS, the columns the replay reads.
type statusRows struct {
	vals []driver.Value
	done bool
}

func (*statusRows) Columns() []string {
	return []string{"Slave_SQL_Running", "Last_SQL_Errno", "Last_SQL_Error", "Relay_Master_Log_File", "Exec_Master_Log_Pos"}
}
func (*statusRows) Close() error { return nil }
func (s *statusRows) Next(dest []driver.Value) error {
	if s.done {
		return io.EOF
	}
	s.done = true
	copy(dest, s.vals)
	return nil
}

// replicaStarter starts a fake private server whose DB is the fake replica.
type replicaStarter struct {
	calls *[]string
	r     *fakeReplica
	cfgs  []mariadb.PrivateConfig
}

func (s *replicaStarter) StartPrivate(_ context.Context, cfg mariadb.PrivateConfig) (PrivateServer, error) {
	*s.calls = append(*s.calls, "start")
	s.cfgs = append(s.cfgs, cfg)
	return replicaServer{fakeServer{s.calls}, sql.OpenDB(s.r)}, nil
}

type replicaServer struct {
	fakeServer
	db *sql.DB
}

func (s replicaServer) DB() *sql.DB { return s.db }

// replayPlan is a plan of 3 transactions to until, its relay log written in a
// temporary directory.
func replayPlan(t *testing.T, until binlog.Position) *binlog.Plan {
	dir := t.TempDir()
	relay := filepath.Join(dir, "relay-bin.000001")
	if err := os.WriteFile(relay, []byte("\xfebin relay events"), 0o640); err != nil {
		t.Fatal(err)
	}
	last := binlog.GTID{Domain: 0, Server: 1, Seq: 10}
	st := binlog.State{}
	st.Add(last)
	return &binlog.Plan{From: binlog.Position{File: "mariadb-bin.000001", Pos: 400}, Until: until, State: st,
		Last: &binlog.Group{GTID: last, Time: time.Unix(1764288000, 0)}, Groups: 3, Bytes: 900,
		RelayIndex: filepath.Join(dir, "relay-bin.index"), RelayFiles: []string{relay}, RelayPos: 4, ServerIDs: map[uint32]bool{1: true}}
}

// TestReplayThroughTheSeam drives a point-in-time restore end to end with a fake
// recoverer and a fake server: the recovered copy is started as a replica of the
// plan's relay logs (moved into the copy), applied up to the plan's end, stopped
// there, unconfigured and shut down; the datadir appears whole at the plan's
// coordinates without the relay logs. An applier error fails the restore, the
// datadir never made.
func TestReplayThroughTheSeam(t *testing.T) {
	files := map[string]string{"ibdata1": "system", "db/t.ibd": "pages", "ib_logfile0": "redo"}
	until := binlog.Position{File: "mariadb-bin.000002", Pos: 1234}
	var calls []string
	src := &memSource{inspect: true, files: files, calls: &calls}
	r := &fakeReplica{until: until}
	st := &replicaStarter{calls: &calls, r: r}
	datadir := filepath.Join(t.TempDir(), "data")
	cfg := runConfig(src, &fakeRecoverer{calls: &calls}, datadir)
	cfg.Starter, cfg.Replay = st, &Replay{Plan: replayPlan(t, until), Threads: 2}
	res, err := Restore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"inspect", "server 10.11.19-MariaDB", "staging", "fill", "recover", "start", "shutdown"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if len(st.cfgs) != 1 || st.cfgs[0].Datadir != src.staging || st.cfgs[0].Binary != "/fake/mariadbd" ||
		!slices.Contains(st.cfgs[0].Args, "--slave-parallel-threads=2") {
		t.Errorf("server started with %+v, want the recovering binary on %s as a replica", st.cfgs, src.staging)
	}
	if len(r.stmts) != 4 || !strings.HasPrefix(r.stmts[0], "CHANGE MASTER TO") || !strings.Contains(r.stmts[0], "relay-bin.000001") ||
		r.stmts[1] != "START SLAVE SQL_THREAD UNTIL MASTER_LOG_FILE='mariadb-bin.000002', MASTER_LOG_POS=1234" ||
		r.stmts[2] != "STOP SLAVE SQL_THREAD" || r.stmts[3] != "RESET SLAVE ALL" {
		t.Errorf("statements %q", r.stmts)
	}
	c := res.Coordinates
	if c.GTIDBinlogPos != "0-1-10" || c.BinlogFile != until.File || c.BinlogPos != uint64(until.Pos) {
		t.Errorf("coordinates %+v, want the plan's end", c)
	}
	if _, err := os.Stat(filepath.Join(datadir, relayDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the relay logs are in the datadir: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(datadir, "aria_log_control")); err != nil || string(b) != "recovered" {
		t.Errorf("the datadir is not the recovered copy: %q, %v", b, err)
	}

	calls = nil
	src = &memSource{inspect: true, files: files, calls: &calls}
	r = &fakeReplica{until: binlog.Position{File: "mariadb-bin.000001", Pos: 800}, sqlErr: "Duplicate entry '1' for key 'PRIMARY'"}
	datadir = filepath.Join(t.TempDir(), "data")
	cfg = runConfig(src, &fakeRecoverer{calls: &calls}, datadir)
	cfg.Starter, cfg.Replay = &replicaStarter{calls: &calls, r: r}, &Replay{Plan: replayPlan(t, until)}
	if _, err := Restore(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "stopped with error 1062") {
		t.Errorf("an applier error: %v", err)
	}
	if _, err := os.Stat(datadir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the datadir was made after a failed replay: %v", err)
	}
	if _, err := os.Stat(src.staging); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging %s left after a failed replay: %v", src.staging, err)
	}
}
