package testdb

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// MySQLOptions configures StartMySQL. The zero value is a fresh MySQL 8.0 server with
// the binary log and GTIDs on.
type MySQLOptions struct {
	// Datadir, if set, is an existing datadir (e.g. a restored backup) to run on
	// instead of a freshly initialized one.
	Datadir string
	// ServerID is server_id; 0 means the TCP port (unique among running servers).
	ServerID uint32
	// RedoCapacity is innodb_redo_log_capacity; "" means "8M", the least 8.0.31 takes
	// (it raises a smaller value to 8M with a warning).
	RedoCapacity string
	// NoBinlog turns the binary log off (GTIDs stay on: MySQL keeps gtid_executed in
	// mysql.gtid_executed without a binlog).
	NoBinlog bool
	// Args are extra mysqld options. The InnoDB layout options among them (page size,
	// system tablespace, lower_case_table_names, ...) are also given when the datadir
	// is initialized.
	Args []string
	// Config are extra lines of my.cnf, after the server's own [mysqld] group; a line
	// there overrides the harness's default (e.g. "sync-binlog=1").
	Config []string
	// Basedir is the MySQL installation (bin/mysqld, share/); "" means BasedirMySQL80.
	Basedir string
}

// BasedirMySQL80 is where MySQL 8.0 is installed for the tests: $FERRY_MYSQL_80, else
// /opt/mysql-8.0; "" if neither holds bin/mysqld.
func BasedirMySQL80() string { return mysqlAt(os.Getenv("FERRY_MYSQL_80"), "/opt/mysql-8.0") }

// mysqlAt returns the first of dirs that holds bin/mysqld, or "".
func mysqlAt(dirs ...string) string {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "bin", "mysqld")); err == nil {
			return d
		}
	}
	return ""
}

// NeedMySQL80 returns BasedirMySQL80, or stops a test that needs MySQL 8.0 where it is
// not installed (Missing: it fails under CI, skips elsewhere).
func NeedMySQL80(t testing.TB) string {
	t.Helper()
	b := BasedirMySQL80()
	if b == "" {
		Missing(t, "MySQL 8.0 is not installed (/opt/mysql-8.0 or FERRY_MYSQL_80)", ".ci/run unpacks the MySQL 8.0.31 tarball into /opt/mysql-8.0")
	}
	return b
}

// StartMySQL starts a private mysqld on a fresh datadir (a copy of one initialized once
// per test binary, see mysqlInitialized; its own server_uuid) or on opt.Datadir, waits
// until root can connect over the socket, and registers a cleanup that stops it. The
// Server it returns works as Start's: DB, Exec, Stop, Kill, Restart, Checksums.
func StartMySQL(t testing.TB, opt MySQLOptions) *Server {
	t.Helper()
	needServers(t, "mysqld")
	if opt.Basedir == "" {
		opt.Basedir = NeedMySQL80(t)
	}
	if opt.RedoCapacity == "" {
		opt.RedoCapacity = "8M"
	}
	base := ShortDir(t)
	s := &Server{
		opt:      Options{Datadir: opt.Datadir, ServerID: opt.ServerID, NoBinlog: opt.NoBinlog, Args: opt.Args, Config: opt.Config},
		mysql:    &opt,
		base:     base,
		Datadir:  opt.Datadir,
		Socket:   filepath.Join(base, "mysql.sock"),
		PidFile:  filepath.Join(base, "mysqld.pid"),
		ErrorLog: filepath.Join(base, "error.log"),
	}
	s.ConfigFile = filepath.Join(base, "my.cnf")
	if s.Datadir == "" {
		s.Datadir = filepath.Join(base, "data")
		copyInitialized(t, opt.Basedir, initArgs(opt.Args), s.Datadir)
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
		t.Fatalf("start mysqld on %s: %v\n--- tail of %s ---\n%s", s.Datadir, err, s.ErrorLog, s.logTail(30))
	}
}

// IsMySQL reports whether s is a MySQL server (StartMySQL), not a MariaDB one.
func (s *Server) IsMySQL() bool { return s.mysql != nil }

// mysqlConfig renders my.cnf of a MySQL server for the current port. sync-binlog=0
// matches MariaDB's default (MySQL's is 1: an fsync of the binlog per commit), which
// the workloads' rates and the crash tests (SIGKILL, not power loss) assume.
func (s *Server) mysqlConfig() string {
	o := s.mysql
	id := o.ServerID
	if id == 0 {
		id = uint32(s.Port)
	}
	lines := []string{"[mysqld]", "user=root", "basedir=" + o.Basedir, "datadir=" + s.Datadir,
		"lc-messages-dir=" + filepath.Join(o.Basedir, "share"), "socket=" + s.Socket,
		"port=" + strconv.Itoa(s.Port), "bind-address=127.0.0.1", "mysqlx=OFF", "pid-file=" + s.PidFile,
		"log-error=" + s.ErrorLog, "tmpdir=" + s.base, "innodb-redo-log-capacity=" + o.RedoCapacity,
		"innodb-buffer-pool-size=64M", "skip-name-resolve", "server-id=" + strconv.FormatUint(uint64(id), 10),
		"performance-schema=ON", "gtid-mode=ON", "enforce-gtid-consistency=ON", "sync-binlog=0"}
	lines = append(lines, mysqlSmallPerfSchema...)
	if o.NoBinlog {
		lines = append(lines, "skip-log-bin")
	} else {
		lines = append(lines, "log-bin=mysql-bin", "relay-log=relay-bin")
	}
	lines = append(lines, o.Config...)
	return strings.Join(lines, "\n") + "\n"
}

// mysqlSmallPerfSchema trims performance_schema's statement history and digests, which
// the tests do not read (ferry reads log_status): a fresh server's RSS drops from about
// 380 MB to 270 MB.
var mysqlSmallPerfSchema = []string{"performance-schema-events-statements-history-long-size=0",
	"performance-schema-events-waits-history-long-size=0", "performance-schema-events-stages-history-long-size=0",
	"performance-schema-events-transactions-history-long-size=0", "performance-schema-digests-size=1000",
	"performance-schema-max-digest-length=256", "performance-schema-max-sql-text-length=256"}

// initArgs are the options among args that shape a datadir and so must be given to
// mysqld --initialize too (dashes and underscores alike).
func initArgs(args []string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		name = strings.ReplaceAll(name, "_", "-")
		switch name {
		case "--innodb-page-size", "--innodb-data-file-path", "--innodb-data-home-dir", "--innodb-undo-directory",
			"--lower-case-table-names", "--innodb-log-group-home-dir", "--innodb-directories":
			out = append(out, a)
		}
	}
	return out
}
