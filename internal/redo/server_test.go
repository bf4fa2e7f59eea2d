//go:build e2e

package redo

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// testServer is a private mariadbd from the shared harness, with the helpers the redo
// tests use.
type testServer struct {
	*testdb.Server
	db *sql.DB
}

// startServer starts mariadbd with the given innodb_log_file_size and extra options;
// the harness stops it by pid at cleanup.
func startServer(t *testing.T, logSize string, extra ...string) *testServer {
	t.Helper()
	s := testdb.Start(t, testdb.Options{LogFileSize: logSize, Args: extra, NoBinlog: true})
	return &testServer{Server: s, db: s.DB(t)}
}

func (s *testServer) logPath() string { return filepath.Join(s.Datadir, "ib_logfile0") }

// exec runs SQL, failing the test on error.
func (s *testServer) exec(t *testing.T, q string) {
	t.Helper()
	s.Exec(t, q)
}

// logTail is the end of the server's error log, for failure messages.
func (s *testServer) logTail() string { return "see " + s.ErrorLog }

// LSNs implements ServerLSN with SHOW GLOBAL STATUS.
func (s *testServer) LSNs(ctx context.Context) (flushed, current uint64, err error) {
	return mariadb.LSNSource{DB: s.db}.LSNs(ctx)
}

// stopAtCurrent stops the tailer at the server's current LSN (made durable first) and
// waits for Run, whose result arrives on done; it returns the stop LSN.
func stopAtCurrent(ctx context.Context, t *testing.T, s *testServer, tl *Tailer, done <-chan error) uint64 {
	t.Helper()
	_, stop, err := s.LSNs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.exec(t, "FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS")
	tl.StopAt(stop)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return stop
}
