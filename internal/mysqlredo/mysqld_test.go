//go:build e2e

package mysqlredo

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/go-sql-driver/mysql"
)

// A private MySQL 8.0 harness: these tests start mysqld with options testdb.StartMySQL
// does not give (redo checksums off, a redo log consumer, redo disabled).

// mysqlBase is MySQL 8.0's installation: FERRY_MYSQL_80 or /opt/mysql-8.0.
func mysqlBase() string { return testdb.BasedirMySQL80() }

// needMySQL stops the test without MySQL 8.0 as testdb's rule says (it fails under CI,
// whose .ci/run installs it).
func needMySQL(t *testing.T) { testdb.NeedMySQL80(t) }

// mysqlServer is a private mysqld started by a test.
type mysqlServer struct {
	datadir string
	socket  string
	errLog  string
	cmd     *exec.Cmd
	exited  chan struct{}
	db      *sql.DB
}

// shortDir returns a short temp dir (unix socket paths are limited to 107 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "mr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// initDatadir initializes a new datadir with an insecure root.
func initDatadir(t *testing.T, datadir string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(mysqlBase(), "bin/mysqld"), "--no-defaults", "--initialize-insecure",
		"--basedir="+mysqlBase(), "--datadir="+datadir, "--lc-messages-dir="+mysqlBase()+"/share", "--user=root").CombinedOutput()
	if err != nil {
		t.Fatalf("mysqld --initialize-insecure: %v\n%s", err, out)
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startMySQL starts mysqld on datadir (networkless unless tcp), waits until it
// accepts connections and registers a cleanup that stops it by pid.
func startMySQL(t *testing.T, datadir string, tcp bool, args ...string) *mysqlServer {
	t.Helper()
	dir := shortDir(t)
	s := &mysqlServer{datadir: datadir, socket: filepath.Join(dir, "s"), errLog: filepath.Join(dir, "err.log"), exited: make(chan struct{})}
	argv := []string{"--no-defaults", "--basedir=" + mysqlBase(), "--datadir=" + datadir, "--lc-messages-dir=" + mysqlBase() + "/share",
		"--user=root", "--mysqlx=OFF", "--socket=" + s.socket, "--log-error=" + s.errLog, "--pid-file=" + filepath.Join(dir, "pid"),
		"--skip-log-bin", "--innodb-redo-log-capacity=8M", "--innodb-buffer-pool-size=64M"}
	if tcp {
		argv = append(argv, "--port="+strconv.Itoa(freePort(t)), "--bind-address=127.0.0.1")
	} else {
		argv = append(argv, "--skip-networking")
	}
	s.cmd = exec.Command(filepath.Join(mysqlBase(), "bin/mysqld"), append(argv, args...)...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.stop(t) })
	if err := s.waitReady(); err != nil {
		t.Fatalf("mysqld on %s: %v\n%s", datadir, err, s.logTail(30))
	}
	return s
}

// waitReady connects until the server answers, it exits or 90 s pass.
func (s *mysqlServer) waitReady() error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", s.socket
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	s.db = db
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		select {
		case <-s.exited:
			return errors.New("mysqld exited")
		default:
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM to the server's pid and waits for it to exit.
func (s *mysqlServer) stop(t *testing.T) {
	select {
	case <-s.exited:
		return
	default:
	}
	if s.db != nil {
		s.db.Close()
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("mysqld (pid %d) did not stop within 60 s", s.cmd.Process.Pid)
	}
}

// logTail returns the last n lines of the error log.
func (s *mysqlServer) logTail(n int) string {
	b, _ := os.ReadFile(s.errLog)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// log returns the whole error log.
func (s *mysqlServer) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.errLog)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exec runs statements, failing the test on error.
func (s *mysqlServer) exec(t *testing.T, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// uint64Of runs a query returning one unsigned integer.
func uint64Of(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, query string) uint64 {
	t.Helper()
	var v uint64
	if err := q.QueryRowContext(context.Background(), query).Scan(&v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// redoDir is the server's #innodb_redo.
func (s *mysqlServer) redoDir() string { return filepath.Join(s.datadir, DirName) }

// copyDir copies a stopped server's datadir (a template) with cp -a.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// skipInCopy are the datadir entries a backup leaves out.
var skipInCopy = regexp.MustCompile(`^(#innodb_redo|#innodb_temp|ibtmp1|.*\.dblwr|.*\.pid|.*\.err|mysqld-auto\.cnf)$`)

// tablespace matches the files copied page by page with checksum validation.
var tablespace = regexp.MustCompile(`(^ibdata\d+|\.ibd|^undo_\d+)$`)

// copyLive copies a running server's datadir with plain reads, re-reading a
// tablespace page whose checksum does not match (written while read).
func copyLive(t *testing.T, src, dst string) (files int, rereads int) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel != "." && skipInCopy.MatchString(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o750)
		}
		files++
		n, err := copyFile(path, target, tablespace.MatchString(d.Name()))
		rereads += n
		return err
	})
	if err != nil {
		t.Fatalf("copy datadir: %v", err)
	}
	return files, rereads
}

// copyFile copies one file; pages of a tablespace are validated and re-read
// until their checksum matches.
func copyFile(src, dst string, pages bool) (int, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	if !pages {
		_, err := io.Copy(out, in)
		return 0, err
	}
	const page = 16 << 10
	st, err := in.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, page)
	rereads := 0
	for off := int64(0); off+page <= st.Size(); off += page {
		for try := 0; ; try++ {
			if _, err := in.ReadAt(buf, off); err != nil {
				return rereads, err
			}
			if pageOK(buf) {
				break
			}
			if try == 50 {
				return rereads, fmt.Errorf("%s page %d: checksum mismatch after %d reads", src, off/page, try+1)
			}
			rereads++
			time.Sleep(2 * time.Millisecond)
		}
		if _, err := out.Write(buf); err != nil {
			return rereads, err
		}
	}
	return rereads, nil
}

// pageOK validates a 16 KiB page written with innodb_checksum_algorithm=crc32.
func pageOK(p []byte) bool {
	stored := binary.BigEndian.Uint32(p)
	if stored == 0 && binary.BigEndian.Uint64(p[16:]) == 0 {
		for _, c := range p {
			if c != 0 {
				return false
			}
		}
		return true
	}
	if binary.BigEndian.Uint32(p[len(p)-4:]) != binary.BigEndian.Uint32(p[20:]) {
		return false
	}
	return stored == crc32c(p[4:26])^crc32c(p[38:len(p)-8]) || stored == noChecksum
}
