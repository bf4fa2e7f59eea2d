package mariadb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVersionRefusesUnsupportedServers(t *testing.T) {
	cases := []struct {
		version, comment, wantErr string
	}{
		{"8.0.36", "MySQL Community Server - GPL", "is not MariaDB"},
		{"8.4.2-2", "Percona Server (GPL)", "is not MariaDB"},
		{"10.6.18-MariaDB-log", "mariadb.org binary distribution", "redo log format predates 10.8"},
		{"10.5.9-MariaDB", "", "redo log format predates 10.8"},
		{"10.11.19-MariaDB-0+deb12u1-log", "Debian 12", ""},
		{"11.4.3-MariaDB", "", ""},
	}
	for _, c := range cases {
		info := Info{Version: c.version, Vars: map[string]string{"version_comment": c.comment}}
		err := info.parseVersion()
		if c.wantErr == "" && err != nil {
			t.Errorf("%s: unexpected error %v", c.version, err)
		}
		if c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: error %v, want %q", c.version, err, c.wantErr)
		}
	}
}

func TestResolveReadsClientGroupAndPasswordFile(t *testing.T) {
	dir := t.TempDir()
	cnf := filepath.Join(dir, "my.cnf")
	os.WriteFile(cnf, []byte("[mysqld]\nuser=mysql\n[client]\nuser = backup\npassword=\"s3cret\"\nsocket=/tmp/x.sock\n"), 0o600)
	c, err := ConnConfig{DefaultsFile: cnf}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "backup" || c.Password != "s3cret" || c.Socket != "/tmp/x.sock" {
		t.Fatalf("got %+v", c)
	}
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("fromfile\n"), 0o600)
	c, _ = ConnConfig{DefaultsFile: cnf, PasswordFile: pw, User: "cli"}.Resolve()
	if c.User != "cli" || c.Password != "fromfile" {
		t.Fatalf("flags must win over the defaults file: %+v", c)
	}
	t.Setenv("MYSQL_PWD", "envpw")
	c, _ = ConnConfig{}.Resolve()
	if c.Password != "envpw" || c.User != "root" || c.Socket == "" {
		t.Fatalf("MYSQL_PWD and defaults: %+v", c)
	}
}

func TestMissingPrivileges(t *testing.T) {
	grants := []string{"GRANT RELOAD, PROCESS ON *.* TO `b`@`localhost`"}
	got := missingPrivileges(grants, BackupPrivileges)
	if len(got) != 1 || got[0] != "BINLOG MONITOR" {
		t.Fatalf("missing = %v", got)
	}
	if m := missingPrivileges([]string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"}, BackupPrivileges); m != nil {
		t.Fatalf("ALL PRIVILEGES: missing %v", m)
	}
}

func TestSeries(t *testing.T) {
	for v, want := range map[string][2]string{
		"10.11.19-MariaDB-0+deb12u1-log": {"10.11", "19"},
		"11.4.3-MariaDB":                 {"11.4", "3"},
		"10.11":                          {"", ""},
		"":                               {"", ""},
		"MariaDB 10.11.19":               {"", ""},
	} {
		s, r, ok := Series(v)
		if s != want[0] || r != want[1] || ok != (want[0] != "") {
			t.Errorf("Series(%q) = %q, %q, %v; want %q, %q", v, s, r, ok, want[0], want[1])
		}
	}
}

// TestReplicaAddress: report_host and report_port win over hostname and port; an unset
// report_port (0) or a bad one is passed over.
func TestReplicaAddress(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		host string
		port int
	}{
		{map[string]string{"hostname": "db1", "port": "3307", "report_port": "0"}, "db1", 3307},
		{map[string]string{"hostname": "db1", "port": "3307", "report_host": "db1.example", "report_port": "3310"}, "db1.example", 3310},
		{map[string]string{"hostname": "db1", "port": "99999"}, "db1", 0},
		{map[string]string{}, "", 0},
	} {
		host, port := Info{Vars: c.vars}.ReplicaAddress()
		if host != c.host || port != c.port {
			t.Errorf("%v: %s:%d, want %s:%d", c.vars, host, port, c.host, c.port)
		}
	}
}
