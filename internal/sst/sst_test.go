package sst

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The argv mariadbd 10.11.19 gives a joiner and a donor (as its
// wsrep_sst_common parses them), as separate words.
var (
	joinerArgv = []string{"--role", "joiner", "--address", "127.0.0.1:25444", "--datadir", "/var/lib/mysql/",
		"--defaults-file", "/etc/n2.cnf", "--parent", "12796", "--progress", "0", "--binlog", "mysql-bin",
		"--mysqld-args", "--defaults-file=/etc/n2.cnf", "--log-bin=/var/log/mysql/mysql-bin", "--wsrep-new-cluster"}
	donorArgv = []string{"--role", "donor", "--address", "127.0.0.1:25444/ferry-1/0123456789abcdef0123456789abcdef", "--local-port", "23306",
		"--socket", "/run/n1.sock", "--progress", "0", "--datadir", "/var/lib/n1/", "--defaults-file", "/etc/n1.cnf",
		"--gtid", "09143526-e8d6-11f1-a595-5f863b832ca2:1509", "--gtid-domain-id", "1", "--binlog", "mysql-bin", "--bypass",
		"--mysqld-args", "--defaults-file=/etc/n1.cnf"}
)

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs(joinerArgv)
	if err != nil {
		t.Fatal(err)
	}
	if a.Role != RoleJoiner || a.Address != "127.0.0.1:25444" || a.Datadir != "/var/lib/mysql/" || a.DefaultsFile != "/etc/n2.cnf" ||
		a.Parent != 12796 || a.Progress || a.Binlog != "mysql-bin" || len(a.Mysqld) != 3 {
		t.Fatalf("joiner: %+v", a)
	}
	if v, ok := a.MysqldOption("log_bin"); !ok || v != "/var/log/mysql/mysql-bin" {
		t.Fatalf("log-bin from --mysqld-args: %q %v", v, ok)
	}
	d, err := ParseArgs(donorArgv)
	if err != nil {
		t.Fatal(err)
	}
	if d.Role != RoleDonor || !d.Bypass || d.GTIDDomainID != 1 || d.LocalPort != 23306 || d.Socket != "/run/n1.sock" ||
		d.GTID != "09143526-e8d6-11f1-a595-5f863b832ca2:1509" {
		t.Fatalf("donor: %+v", d)
	}
	// A newer server's unknown options, with and without a value, are skipped.
	withNew := append([]string{"--future-flag", "--future-opt", "v", "--x=1"}, joinerArgv...)
	if a2, err := ParseArgs(withNew); err != nil || a2.Address != a.Address || a2.Parent != a.Parent {
		t.Fatalf("unknown options: %+v %v", a2, err)
	}
	for _, bad := range [][]string{
		{"--role", "observer", "--address", "x:1", "--datadir", "/d"},
		{"--role", "joiner", "--datadir", "/d"},
		{"--role", "joiner", "--address", "x:1", "--datadir", "/d", "--parent", "abc"},
		make([]string, maxArgs+1),
	} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%.60q) accepted", bad)
		}
	}
}

func TestAddresses(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:25444": "127.0.0.1:25444", "127.0.0.1": "127.0.0.1:4444", "[::1]:5": "[::1]:5",
		"db2:4444/xtrabackup_sst//1": "db2:4444", "CN:secret@db2:7": "db2:7",
	} {
		if got, err := listenAddress(in); err != nil || got != want {
			t.Errorf("listenAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	const salt = "0123456789abcdef0123456789abcdef"
	if got, s, err := joinerAddress("127.0.0.1:25444/ferry-1/" + salt); err != nil || got != "127.0.0.1:25444" || s != salt {
		t.Errorf("joinerAddress = %q, %q, %v", got, s, err)
	}
	for _, bad := range []string{"127.0.0.1:25444/xtrabackup_sst//1", "127.0.0.1:25444", "127.0.0.1:25444/ferry-1", "127.0.0.1:25444/ferry-1/xyz",
		":4444/ferry-1/" + salt, "[::1:5/ferry-1/" + salt, "h:99999/ferry-1/" + salt} {
		if _, _, err := joinerAddress(bad); err == nil {
			t.Errorf("joinerAddress(%q) accepted", bad)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	if _, err := exec.LookPath("my_print_defaults"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("my_print_defaults is not installed: .ci/run installs mariadb-client-core")
		}
		t.Skip("my_print_defaults not installed (mariadb-client-core)")
	}
	dir := t.TempDir()
	cnf := filepath.Join(dir, "my.cnf")
	os.WriteFile(cnf, []byte("[mysqld]\ndatadir=/x\n[sst]\nstreams=2\nmax-rate=8M\ncompress=lz4\nssl-ca=/ca.pem\nwsrep_sst_auth=sst:from-cnf\nsst-initial-timeout=9\nmax_impact=20\n[sst.n2]\nstreams=3\n"), 0o600)
	a := Args{Role: RoleJoiner, DefaultsFile: cnf, DefaultsGroupSuffix: ".n2"}
	env := map[string]string{}
	c, err := LoadConfig(context.Background(), a, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Streams != 3 || c.MaxRate != 8<<20 || c.Compress != "lz4" || c.CA != "/ca.pem" || c.Auth != "sst:from-cnf" ||
		c.InitialTimeout != 9*time.Second || c.MaxImpact != 0.2 || c.Grace != DefaultGrace {
		t.Fatalf("config: %+v", c)
	}
	env["WSREP_SST_OPT_AUTH"] = "sst:from-env"
	if c, _ := LoadConfig(context.Background(), a, func(k string) string { return env[k] }, nil); c.Auth != "sst:from-env" {
		t.Fatalf("the environment's auth did not win: %q", c.Auth)
	}
	env["WSREP_SST_OPT_AUTH"] = "(null)"
	if c, _ := LoadConfig(context.Background(), a, func(k string) string { return env[k] }, nil); c.Auth != "sst:from-cnf" {
		t.Fatalf("(null) is unset: %q", c.Auth)
	}
	os.WriteFile(cnf, []byte("[sst]\nstreams=0\n"), 0o600)
	if _, err := LoadConfig(context.Background(), a, func(string) string { return "" }, nil); err == nil || !strings.Contains(err.Error(), "streams") {
		t.Fatalf("streams=0: %v", err)
	}
}

func TestStdinAuth(t *testing.T) {
	got, err := readStdinAuth(strings.NewReader("sst_user=sst\nsst_password=p=w\nsst_remote_user=x\n"))
	if err != nil || got != "sst:p=w" {
		t.Fatalf("readStdinAuth = %q, %v", got, err)
	}
	if got, _ := readStdinAuth(strings.NewReader("")); got != "" {
		t.Fatalf("empty stdin gave %q", got)
	}
}

func TestSecurity(t *testing.T) {
	if _, err := (Config{}).security(); err == nil || !strings.Contains(err.Error(), "wsrep_sst_auth") {
		t.Fatalf("no auth, no CA: %v", err)
	}
	a, _ := (Config{Auth: "sst:a"}).security()
	b, _ := (Config{Auth: "sst:b"}).security()
	if bytes.Equal(a.Token, b.Token) || len(a.Token) == 0 {
		t.Fatal("different wsrep_sst_auth gave the same secret")
	}
	if _, err := (Config{CA: "/ca", Cert: "/c"}).security(); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
}

func TestLogLine(t *testing.T) {
	var b bytes.Buffer
	NewLogger(&b, "joiner", 0).Info("SST complete", "position", "u:5", "note", "two words")
	line := b.String()
	if !strings.Contains(line, " WSREP_SST: [INFO] ferry joiner: SST complete position=u:5 note=\"two words\"\n") {
		t.Fatalf("log line %q", line)
	}
}

func TestNodeLocal(t *testing.T) {
	s := server{datadir: "/d", opts: map[string]string{"log_error": "node.log", "pid_file": "/run/x.pid"}}
	local := s.local()
	for name, want := range map[string]bool{"grastate.dat": true, "gvwstate.dat": true, "galera.cache": true, "gcache.page.000001": true,
		"server-key.pem": true, "host.err": true, "node.log": true, "ddl_recovery.log": false, "ibdata1": false, "mysql-bin.000001": false,
		"mysql-bin.index": false, "mysql": false, "x.pid": true} {
		if local(name) != want {
			t.Errorf("local(%q) = %v, want %v", name, !want, want)
		}
	}
	bad := server{datadir: "/d", opts: map[string]string{"innodb_undo_directory": "/undo"}}
	if err := bad.checkLayout(); err == nil {
		t.Fatal("an undo directory outside the datadir was accepted")
	}
	if err := (server{datadir: "/d", opts: map[string]string{"innodb_undo_directory": "./"}}).checkLayout(); err != nil {
		t.Fatalf("undo directory ./: %v", err)
	}
}

func TestBinlogAside(t *testing.T) {
	root := t.TempDir()
	datadir, logs := filepath.Join(root, "data"), filepath.Join(root, "logs")
	os.MkdirAll(datadir, 0o755)
	os.MkdirAll(logs, 0o755)
	for _, f := range []string{"mysql-bin.000001", "mysql-bin.index", "other.000001"} {
		os.WriteFile(filepath.Join(logs, f), []byte("x"), 0o600)
	}
	s := server{datadir: datadir, opts: map[string]string{"log_bin": filepath.Join(logs, "mysql-bin")}}
	aside, err := s.binlogAside("T")
	if err != nil || aside != filepath.Join(logs, "ferry-old-binlogs-T") {
		t.Fatalf("binlogAside = %q, %v", aside, err)
	}
	left, _ := os.ReadDir(logs)
	if len(left) != 2 { // other.000001 and the aside directory
		t.Fatalf("left in the binlog dir: %v", left)
	}
	if aside, _ := (server{datadir: datadir, opts: map[string]string{"log_bin": "mysql-bin"}}).binlogAside("T"); aside != "" {
		t.Fatalf("binary logs inside the datadir moved on their own: %q", aside)
	}
}

func TestRecoveryMemory(t *testing.T) {
	s := server{opts: map[string]string{"innodb_buffer_pool_size": "1G"}}
	if got := s.recoveryMemory(""); got != "1073741824" {
		t.Fatalf("default from the buffer pool: %q", got)
	}
	if got := s.recoveryMemory("2G"); got != "2G" {
		t.Fatalf("[sst] use-memory: %q", got)
	}
	if got := (server{opts: map[string]string{"innodb_buffer_pool_size": "16M"}}).recoveryMemory(""); got != "256M" {
		t.Fatalf("a small pool: %q", got)
	}
}
