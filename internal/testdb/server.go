// Package testdb is the end-to-end test harness: it runs private mariadbd
// instances, drives concurrent workloads against them and checks invariants
// on (restored) copies. It is imported by tests only.
package testdb

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options configures Start. The zero value is a fresh server with binlog on.
type Options struct {
	// Datadir, if set, is an existing datadir (e.g. a restored backup) to run
	// on instead of a freshly installed one.
	Datadir string
	// ServerID is server_id; 0 means the TCP port (unique among running servers).
	ServerID uint32
	// LogFileSize is innodb_log_file_size; "" means "8M".
	LogFileSize string
	// NoBinlog turns the binary log off.
	NoBinlog bool
	// Args are extra mariadbd options (e.g. "--innodb-page-size=4k").
	Args []string
	// Config are extra lines of my.cnf, after the server's own group (they may open
	// other groups, e.g. "[sst]").
	Config []string
	// Env is extra environment for mariadbd (e.g. a PATH with an SST method on it).
	Env []string
	// Basedir, if set, is another MariaDB's installation (bin/mariadbd,
	// scripts/mariadb-install-db, share/): MariaDB 11.4 from its Maven package
	// (Basedir114). Empty: the system's mariadbd.
	Basedir string
}

// StartTimeout bounds how long Start and Restart wait for the server to accept connections.
const StartTimeout = 90 * time.Second

// StopTimeout bounds how long Stop waits for the server to exit after SIGTERM.
const StopTimeout = 60 * time.Second

// Server is a running private mariadbd (Start) or mysqld (StartMySQL). Its files live
// under a temp dir of the test.
type Server struct {
	Datadir    string // data directory
	Socket     string // unix socket path
	Port       int    // TCP port on 127.0.0.1
	PidFile    string // pid file written by mariadbd
	ErrorLog   string // log-error file
	ConfigFile string // my.cnf passed with --defaults-file

	opt    Options
	mysql  *MySQLOptions // set on a MySQL server (StartMySQL)
	base   string
	mu     sync.Mutex
	db     *sql.DB
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start installs (unless opt.Datadir is set) and starts a private mariadbd,
// waits until it accepts connections and registers a cleanup that stops it.
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	needServers(t, "mariadbd")
	if opt.LogFileSize == "" {
		opt.LogFileSize = "8M"
	}
	base := ShortDir(t)
	s := &Server{
		opt:      opt,
		base:     base,
		Datadir:  opt.Datadir,
		Socket:   filepath.Join(base, "mysql.sock"),
		PidFile:  filepath.Join(base, "mariadbd.pid"),
		ErrorLog: filepath.Join(base, "error.log"),
	}
	s.ConfigFile = filepath.Join(base, "my.cnf")
	if s.Datadir == "" {
		s.Datadir = filepath.Join(base, "data")
		installDB(t, s.Datadir, opt.Basedir, opt.Args)
	}
	t.Cleanup(func() { s.cleanup(t) })
	for attempt := 0; ; attempt++ {
		s.Port = freePort(t)
		err := s.launch()
		if err == nil {
			return s
		}
		if attempt < 2 && strings.Contains(s.logTail(5), "already in use") {
			continue // lost the race for the port
		}
		t.Fatalf("start mariadbd on %s: %v\n--- tail of %s ---\n%s", s.Datadir, err, s.ErrorLog, s.logTail(30))
	}
}

// ShortDir makes a new directory under /tmp, whose path is short enough to hold a
// unix socket (108 bytes), removed after the test unless it failed and the
// environment sets FERRY_E2E_KEEP (then it is kept, and logged).
func ShortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "ferry-test-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("FERRY_E2E_KEEP") != "" {
			t.Logf("FERRY_E2E_KEEP: kept %s", d)
			return
		}
		os.RemoveAll(d)
	})
	return d
}

// installDB creates a fresh datadir with mariadb-install-db; the InnoDB layout options
// among args (page size, system and undo tablespaces) must be given at creation.
func installDB(t testing.TB, datadir, basedir string, args []string) {
	t.Helper()
	bin, err := exec.LookPath("mariadb-install-db")
	if basedir != "" {
		bin, err = filepath.Join(basedir, "scripts", "mariadb-install-db"), nil
	}
	if err != nil {
		t.Fatalf("mariadb-install-db not found on PATH: install mariadb-server to run end-to-end tests")
	}
	cmd := []string{"--no-defaults", "--datadir=" + datadir, "--user=root", "--auth-root-authentication-method=normal"}
	if basedir != "" {
		cmd = append(cmd, "--basedir="+basedir)
	}
	for _, a := range args {
		for _, layout := range []string{"--innodb-page-size=", "--innodb-data-file-path=", "--innodb-undo-tablespaces=", "--innodb-checksum-algorithm="} {
			if strings.HasPrefix(a, layout) {
				cmd = append(cmd, a)
			}
		}
	}
	// One retry: a bootstrap that fails once under the load of a parallel test run (it
	// did once in CI, its reason cut off) is not what any test here is about.
	for attempt := 1; ; attempt++ {
		out, err := exec.Command(bin, cmd...).CombinedOutput()
		if err == nil {
			return
		}
		msg := fmt.Sprintf("mariadb-install-db --datadir=%s: %v\n%s%s", datadir, err, errorLines(string(out)), tail(string(out), 10))
		if attempt == 2 {
			t.Fatal(msg)
		}
		t.Logf("%s\n(trying once more)", msg)
		os.RemoveAll(datadir)
		time.Sleep(time.Second)
	}
}

// errorLines are the "[ERROR]" lines of a server's output, which say why it stopped.
func errorLines(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "[ERROR]") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// mariadbdPath finds mariadbd on PATH, else in /usr/sbin.
func mariadbdPath() (string, error) {
	if p, err := exec.LookPath("mariadbd"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/mariadbd"); err == nil {
		return "/usr/sbin/mariadbd", nil
	}
	return "", errors.New("mariadbd not found on PATH or in /usr/sbin: install mariadb-server 10.11 to run end-to-end tests")
}

// config renders my.cnf for the current port.
func (s *Server) config() string {
	if s.mysql != nil {
		return s.mysqlConfig()
	}
	id := s.opt.ServerID
	if id == 0 {
		id = uint32(s.Port)
	}
	lines := []string{"[mariadbd]", "user=root", "datadir=" + s.Datadir, "socket=" + s.Socket,
		"port=" + strconv.Itoa(s.Port), "bind-address=127.0.0.1", "pid-file=" + s.PidFile,
		"log-error=" + s.ErrorLog, "tmpdir=" + s.base, "innodb-log-file-size=" + s.opt.LogFileSize,
		"innodb-buffer-pool-size=64M", "skip-name-resolve", "server-id=" + strconv.FormatUint(uint64(id), 10)}
	if !s.opt.NoBinlog {
		lines = append(lines, "log-bin=mysql-bin", "binlog-format=ROW", "relay-log=relay-bin")
	}
	if b := s.opt.Basedir; b != "" {
		// skip-ssl: 11.4 makes a TLS certificate at every start otherwise (5-30 s here).
		lines = append(lines, "basedir="+b, "lc-messages-dir="+filepath.Join(b, "share"), "skip-ssl")
	}
	lines = append(lines, s.opt.Config...)
	return strings.Join(lines, "\n") + "\n"
}

// program is the server's binary by name, for messages: mariadbd, or mysqld.
func (s *Server) program() string {
	if s.mysql != nil {
		return "mysqld"
	}
	return "mariadbd"
}

// binary finds the server's binary: basedir's mysqld or mariadbd, else the system's mariadbd.
func (s *Server) binary() (string, error) {
	switch {
	case s.mysql != nil:
		return filepath.Join(s.mysql.Basedir, "bin", "mysqld"), nil
	case s.opt.Basedir != "":
		return filepath.Join(s.opt.Basedir, "bin", "mariadbd"), nil
	}
	return mariadbdPath()
}

// launch writes the config, starts the server and waits until it is ready.
func (s *Server) launch() error {
	bin, err := s.binary()
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.ConfigFile, []byte(s.config()), 0o644); err != nil {
		return err
	}
	os.Remove(s.PidFile)
	out, err := os.OpenFile(filepath.Join(s.base, s.program()+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	args := append([]string{"--defaults-file=" + s.ConfigFile, "--user=root"}, s.opt.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if len(s.opt.Env) > 0 {
		cmd.Env = append(os.Environ(), s.opt.Env...)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.waitReady(exited)
}

// waitReady polls until the server answers a ping, exits, or StartTimeout passes.
func (s *Server) waitReady(exited chan struct{}) error {
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(StartTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err = db.Ping(); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited during startup (%v)", s.program(), s.cmd.ProcessState)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.signal(syscall.SIGKILL)
			<-exited
			return fmt.Errorf("not accepting connections after %v: %w", StartTimeout, err)
		}
	}
}

// Restart starts the server again on the same datadir and configuration
// after Stop or Kill.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.running() {
		t.Fatalf("restart %s: server is still running", s.Datadir)
	}
	if err := s.launch(); err != nil {
		t.Fatalf("restart %s on %s: %v\n--- tail of %s ---\n%s", s.program(), s.Datadir, err, s.ErrorLog, s.logTail(30))
	}
}

// running reports whether the server process is alive.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// pid returns the server pid from the pid file, else from the child process.
func (s *Server) pid() int {
	if b, err := os.ReadFile(s.PidFile); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 {
			return p
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// signal sends sig to the server pid.
func (s *Server) signal(sig syscall.Signal) error {
	return syscall.Kill(s.pid(), sig)
}

// Stop shuts the server down with SIGTERM and waits for its pid to exit; after
// StopTimeout it SIGKILLs it and fails the test. It closes the handle DB returned.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
}

// stop is Stop without a testing.TB, for cleanups.
func (s *Server) stop() error {
	s.closeDB()
	if !s.running() {
		return nil
	}
	if s.mysql != nil {
		s.endDumpThreads()
	}
	if err := s.signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop %s pid %d: %w", s.program(), s.pid(), err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(StopTimeout):
	}
	s.signal(syscall.SIGKILL)
	<-s.exited
	return fmt.Errorf("%s on %s did not exit within %v of SIGTERM; killed it\n%s", s.program(), s.Datadir, StopTimeout, s.logTail(30))
}

// Kill SIGKILLs the server (a crash) and waits for the process to go away.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.closeDB()
	if !s.running() {
		t.Fatalf("kill %s on %s: not running", s.program(), s.Datadir)
	}
	if err := s.signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s pid %d: %v", s.program(), s.pid(), err)
	}
	select {
	case <-s.exited:
	case <-time.After(StopTimeout):
		t.Fatalf("%s pid %d still alive %v after SIGKILL", s.program(), s.pid(), StopTimeout)
	}
}

// cleanup stops the server at the end of the test, showing its log on failure.
func (s *Server) cleanup(t testing.TB) {
	if err := s.stop(); err != nil {
		t.Error(err)
	}
	if t.Failed() {
		t.Logf("--- tail of %s ---\n%s", s.ErrorLog, s.logTail(30))
	}
}

// logTail returns the last n lines of the error log.
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.ErrorLog)
	if err != nil {
		return fmt.Sprintf("(no error log: %v)", err)
	}
	return tail(string(b), n)
}

// tail returns the last n lines of text.
func tail(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Configure writes the my.cnf of a server that another program will start (ferry clone
// --start): a free port, socket, pid file and log under a temp dir, datadir opt.Datadir
// or <temp>/data (not created). Adopt attaches to it once it runs.
func Configure(t testing.TB, opt Options) *Server {
	t.Helper()
	if opt.LogFileSize == "" {
		opt.LogFileSize = "8M"
	}
	base := ShortDir(t)
	s := &Server{opt: opt, base: base, Datadir: opt.Datadir, Socket: filepath.Join(base, "mysql.sock"),
		PidFile: filepath.Join(base, "mariadbd.pid"), ErrorLog: filepath.Join(base, "error.log"),
		ConfigFile: filepath.Join(base, "my.cnf"), Port: freePort(t)}
	if s.Datadir == "" {
		s.Datadir = filepath.Join(base, "data")
	}
	if err := os.WriteFile(s.ConfigFile, []byte(s.config()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cleanup(t) })
	return s
}

// Adopt attaches to the server another program started with s.ConfigFile, by its pid
// file, so Stop, Kill and the cleanup work on it.
func (s *Server) Adopt(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(s.PidFile)
	if err != nil {
		t.Fatalf("adopt the server of %s: no pid file: %v", s.ConfigFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("adopt the server of %s: bad pid file %q", s.ConfigFile, b)
	}
	exited := make(chan struct{})
	go func() {
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
		close(exited)
	}()
	s.mu.Lock()
	s.exited = exited
	s.mu.Unlock()
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int { return freePort(t) }

// Basedir114 is where MariaDB 11.4 is installed for the tests (.ci/run unpacks it from
// its Maven package): $FERRY_MARIADB_114, else /opt/mariadb-11.4; "" if neither holds
// bin/mariadbd.
func Basedir114() string {
	for _, d := range []string{os.Getenv("FERRY_MARIADB_114"), "/opt/mariadb-11.4"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "bin", "mariadbd")); err == nil {
			return d
		}
	}
	return ""
}
