package mysql

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

func TestParseLogStatus(t *testing.T) {
	local := `{"gtid_executed": "4e26a112-9b53-e1b2-947d-87631a4e7b1e:1-4097,\n6599a00e-eb1d-11f1-8b26-02fc00000001:1-35", "binary_log_file": "binlog.000002", "binary_log_position": 8812}`
	engines := `{"InnoDB": {"LSN": 206536802, "LSN_checkpoint": 206000000}}`
	end, c, err := parseLogStatus(local, engines)
	if err != nil {
		t.Fatal(err)
	}
	want := mariadb.Coordinates{BinlogFile: "binlog.000002", BinlogPos: 8812,
		GTIDBinlogPos: "4e26a112-9b53-e1b2-947d-87631a4e7b1e:1-4097,6599a00e-eb1d-11f1-8b26-02fc00000001:1-35"}
	want.GTIDCurrentPos = want.GTIDBinlogPos
	if end != 206536802 || !reflect.DeepEqual(c, want) {
		t.Fatalf("got %d %+v", end, c)
	}
	// Without a binlog the file and position are absent.
	if _, c, err := parseLogStatus(`{"gtid_executed": ""}`, engines); err != nil || c.BinlogFile != "" {
		t.Fatalf("no binlog: %+v %v", c, err)
	}
	for _, bad := range [][2]string{
		{`{`, engines},
		{local, `{"InnoDB": {}}`},
		{`{"binary_log_file": "../../etc/passwd", "binary_log_position": 4}`, engines},
		{`{"binary_log_file": ".hidden", "binary_log_position": 4}`, engines},
		{strings.Repeat(" ", maxStatus+1), engines},
	} {
		if _, _, err := parseLogStatus(bad[0], bad[1]); err == nil {
			t.Errorf("parseLogStatus(%.40q, %.40q) accepted", bad[0], bad[1])
		}
	}
}

func TestMissingGrants(t *testing.T) {
	minimal := []string{
		"GRANT RELOAD, PROCESS, REPLICATION CLIENT ON *.* TO `ferry`@`localhost`",
		"GRANT BACKUP_ADMIN ON *.* TO `ferry`@`localhost`",
		"GRANT SELECT ON `performance_schema`.`log_status` TO `ferry`@`localhost`",
	}
	if m := missingGrants(minimal); len(m) != 0 {
		t.Errorf("minimal grants: missing %v", m)
	}
	if m := missingGrants(minimal[:1]); !reflect.DeepEqual(m, []string{"BACKUP_ADMIN", "SELECT on performance_schema.log_status"}) {
		t.Errorf("without BACKUP_ADMIN and log_status: %v", m)
	}
	all := []string{"GRANT SELECT, INSERT, RELOAD, PROCESS, REPLICATION CLIENT ON *.* TO `root`@`localhost` WITH GRANT OPTION",
		"GRANT APPLICATION_PASSWORD_ADMIN,AUDIT_ADMIN,BACKUP_ADMIN,BINLOG_ADMIN ON *.* TO `root`@`localhost` WITH GRANT OPTION"}
	if m := missingGrants(all); len(m) != 0 {
		t.Errorf("root: missing %v", m)
	}
	if m := missingGrants([]string{"GRANT USAGE ON *.* TO `x`@`%`"}); len(m) != 5 {
		t.Errorf("nothing granted: missing %v", m)
	}
}

func TestReplicaSetup(t *testing.T) {
	src := Source{Host: "db1", Port: 3306, User: "repl", Password: `it's a\b`}
	got := ReplicaSetup("8.0.31", "u:1-5", src)
	if got[0] != "RESET MASTER;" || got[1] != "SET GLOBAL gtid_purged = 'u:1-5';" || !strings.Contains(got[2], `SOURCE_PASSWORD='it''s a\\b'`) || !strings.Contains(got[2], "SOURCE_AUTO_POSITION=1") || got[3] != "START REPLICA;" {
		t.Errorf("8.0: %q", got)
	}
	for _, v := range []string{"8.4.3", "9.7.0"} {
		if got := ReplicaSetup(v, "u:1-5", src); got[0] != "RESET BINARY LOGS AND GTIDS;" {
			t.Errorf("%s: %q", v, got[0])
		}
	}
}

func TestParseVersion(t *testing.T) {
	for v, ok := range map[string]bool{"8.0.31": true, "8.0.30": true, "8.0.29": false, "5.7.44-log": false, "8.4.3": true, "9.7.0": true, "x": false} {
		info := mariadb.Info{Version: v}
		if err := parseVersion(&info); (err == nil) != ok {
			t.Errorf("%s: %v", v, err)
		}
	}
	if IsMySQL("10.11.6-MariaDB", "") || !IsMySQL("8.0.31", "MySQL Community Server - GPL") {
		t.Error("IsMySQL")
	}
}

func TestNonInnoDBTables(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"mysql/general_log.CSV", "mysql/slow_log.CSM", "shop/t.ibd", "shop/m.MYD", "shop/m.MYI", "shop/m_365.sdi", "arch/a.ARZ", "#innodb_temp/temp_1.ibt"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := NonInnoDBTables(dir)
	if err != nil || !reflect.DeepEqual(got, []string{"arch.a", "shop.m"}) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestBinlogGTIDs reads testdata/binlog.000002 of a real 8.0.31 (Previous_gtids
// U:1-9, then two transactions U:10 and U:11 ending at 476 and 755): the GTIDs below
// a position join the given set, those above do not.
func TestBinlogGTIDs(t *testing.T) {
	const u = "b69d3b33-eb1c-11f1-a8d5-02fc00000001"
	path := filepath.Join("testdata", "binlog.000002")
	for _, c := range []struct {
		pos       uint64
		set, want string
	}{
		{476, u + ":1-9", u + ":1-10"},  // U:10 was committing: gtid_executed lacked it
		{476, u + ":1-10", u + ":1-10"}, // nothing missing
		{755, u + ":1-9", u + ":1-11"},  // both
		{755, "", u + ":1-11"},          // Previous_gtids alone gives 1-9
		{126, "", ""},                   // only the format description event
		{476, "11111111-1111-1111-1111-111111111111:1-3", "11111111-1111-1111-1111-111111111111:1-3," + u + ":1-10"},
	} {
		got, err := BinlogGTIDs(path, c.pos, c.set)
		if err != nil || got != c.want {
			t.Errorf("BinlogGTIDs(%d, %q) = %q, %v; want %q", c.pos, c.set, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		path string
		pos  uint64
		set  string
	}{
		{path, 476, "not a set"},
		{path, 2, ""},
		{filepath.Join("testdata", "missing"), 4, ""},
		{"mysql_test.go", 100, ""},
	} {
		if _, err := BinlogGTIDs(bad.path, bad.pos, bad.set); err == nil {
			t.Errorf("BinlogGTIDs(%s, %d, %q) accepted", bad.path, bad.pos, bad.set)
		}
	}
}
