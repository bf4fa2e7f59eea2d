package redo

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// testServer is a private mariadbd for end-to-end tests.
type testServer struct {
	dir    string
	sock   string
	errLog string
	cmd    *exec.Cmd
	exited chan struct{}
	db     *sql.DB
}

const mariadbd = "/usr/sbin/mariadbd"

// startServer installs a datadir and starts mariadbd with the given
// innodb_log_file_size and extra options; it is stopped (SIGTERM, wait) at
// cleanup.
func startServer(t *testing.T, logSize string, extra ...string) *testServer {
	t.Helper()
	if _, err := os.Stat(mariadbd); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed: .ci/run must install mariadb-server", mariadbd)
		}
		t.Skipf("skipping: %s not installed (needs MariaDB 10.11 server)", mariadbd)
	}
	dir, err := os.MkdirTemp("", "redo-e2e-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &testServer{dir: dir, sock: filepath.Join(dir, "s.sock"), errLog: filepath.Join(dir, "error.log")}
	datadir := filepath.Join(dir, "d")
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+datadir,
		"--auth-root-authentication-method=normal").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	args := append([]string{"--no-defaults", "--user=root", "--datadir=" + datadir,
		"--socket=" + s.sock, "--port=" + fmt.Sprint(freePort(t)), "--skip-networking=0",
		"--bind-address=127.0.0.1", "--innodb-log-file-size=" + logSize, "--log-error=" + s.errLog,
		"--pid-file=" + filepath.Join(dir, "pid"), "--innodb-buffer-pool-size=64M", "--skip-log-bin"}, extra...)
	s.cmd = exec.Command(mariadbd, args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	s.exited = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.stop(t) })
	s.waitReady(t)
	return s
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitReady waits until the server answers on its socket.
func (s *testServer) waitReady(t *testing.T) {
	t.Helper()
	db, err := sql.Open("mysql", "root@unix("+s.sock+")/mysql")
	if err != nil {
		t.Fatal(err)
	}
	s.db = db
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err = db.Ping(); err == nil {
			return
		}
		select {
		case <-s.exited:
			t.Fatalf("mariadbd exited during startup:\n%s", s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mariadbd not ready: %v\n%s", err, s.logTail())
		}
	}
}

// stop sends SIGTERM to the server and waits for it to exit.
func (s *testServer) stop(t *testing.T) {
	if s.db != nil {
		s.db.Close()
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("mariadbd did not stop within 60s after SIGTERM")
	}
}

// logTail returns the end of the server's error log.
func (s *testServer) logTail() string {
	b, _ := os.ReadFile(s.errLog)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// logPath is the server's ib_logfile0.
func (s *testServer) logPath() string { return filepath.Join(s.dir, "d", "ib_logfile0") }

// exec runs SQL, failing the test on error.
func (s *testServer) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := s.db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// LSNs implements ServerLSN with SHOW GLOBAL STATUS.
func (s *testServer) LSNs(ctx context.Context) (flushed, current uint64, err error) {
	rows, err := s.db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_lsn_flushed','Innodb_lsn_current')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v uint64
		if err := rows.Scan(&k, &v); err != nil {
			return 0, 0, err
		}
		if strings.EqualFold(k, "Innodb_lsn_flushed") {
			flushed = v
		} else {
			current = v
		}
	}
	return flushed, current, rows.Err()
}
