package restore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// fakeStarter stands for the private server run on the prepared copy: it records
// what it is started on and runs nothing (its DB is nil).
type fakeStarter struct {
	calls *[]string
	cfgs  []mariadb.PrivateConfig
	err   error
}

func (s *fakeStarter) StartPrivate(_ context.Context, cfg mariadb.PrivateConfig) (PrivateServer, error) {
	*s.calls = append(*s.calls, "start")
	s.cfgs = append(s.cfgs, cfg)
	if s.err != nil {
		return nil, s.err
	}
	return fakeServer{s.calls}, nil
}

type fakeServer struct{ calls *[]string }

func (fakeServer) DB() *sql.DB       { return nil }
func (fakeServer) LogErrors() string { return "" }
func (s fakeServer) Shutdown(context.Context) error {
	*s.calls = append(*s.calls, "shutdown")
	return nil
}

// TestExportThroughTheSeam drives a table restore end to end with a fake server: the
// copy is recovered (only some tables: innodb_force_recovery 1), the private server
// is started on it with the recovering server's binary, the export runs on the
// recovered copy, the server is shut down, and the copy removed: the datadir is never
// made. A server that does not start fails the restore, the export never run.
func TestExportThroughTheSeam(t *testing.T) {
	files := map[string]string{"ibdata1": "system", "db/t.ibd": "pages", "ib_logfile0": "redo"}
	var calls []string
	src := &memSource{inspect: true, files: files, calls: &calls}
	rec := &fakeRecoverer{calls: &calls}
	st := &fakeStarter{calls: &calls}
	datadir := filepath.Join(t.TempDir(), "data")
	cfg := runConfig(src, rec, datadir)
	cfg.Starter, cfg.Want = st, func(string) bool { return true }
	cfg.Export = func(_ context.Context, _ *sql.DB, dir string) error {
		calls = append(calls, "export")
		if b, err := os.ReadFile(filepath.Join(dir, "aria_log_control")); err != nil || string(b) != "recovered" {
			t.Errorf("the export ran on a copy not recovered: %q, %v", b, err)
		}
		return nil
	}
	res, err := Restore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"inspect", "server 10.11.19-MariaDB", "staging", "fill", "recover", "start", "export", "shutdown"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if len(rec.jobs) != 1 || rec.jobs[0].Force != 1 {
		t.Errorf("recovery jobs %+v, want one with innodb_force_recovery 1", rec.jobs)
	}
	if len(st.cfgs) != 1 || st.cfgs[0].Datadir != src.staging || st.cfgs[0].Binary != "/fake/mariadbd" {
		t.Errorf("server started with %+v, want the recovering binary on %s", st.cfgs, src.staging)
	}
	if res.Coordinates.GTIDBinlogPos != "0-1-7" || res.Datadir != "" {
		t.Errorf("result %+v", res)
	}
	for _, p := range []string{src.staging, datadir} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after a table restore: %v", p, err)
		}
	}

	calls = nil
	src = &memSource{inspect: true, files: files, calls: &calls}
	cfg = runConfig(src, &fakeRecoverer{calls: &calls}, datadir)
	cfg.Starter = &fakeStarter{calls: &calls, err: errors.New("mariadbd: cannot start")}
	cfg.Export = func(context.Context, *sql.DB, string) error {
		t.Error("the export ran without a server")
		return nil
	}
	if _, err := Restore(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("a server that does not start: %v", err)
	}
	if _, err := os.Stat(src.staging); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging %s left: %v", src.staging, err)
	}
}
