package drill

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

func TestCompare(t *testing.T) {
	recorded := []mariadb.Table{
		{Schema: "shop", Name: "orders", Engine: "InnoDB"},
		{Schema: "shop", Name: "gone", Engine: "InnoDB"},
		{Schema: "shop", Name: "log", Engine: "Aria"},
		{Schema: "shop", Name: "unopened", Engine: "InnoDB"},
		{Schema: "mysql", Name: "user", Engine: ""}, // recorded without an engine: only its presence counts
	}
	found := []mariadb.Table{
		{Schema: "shop", Name: "orders", Engine: "innodb"}, // the case of an engine name does not matter
		{Schema: "shop", Name: "log", Engine: "MyISAM"},
		{Schema: "shop", Name: "unopened", Engine: ""},
		{Schema: "mysql", Name: "user", Engine: "Aria"},
		{Schema: "shop", Name: "extra", Engine: "InnoDB"}, // not recorded: not a failure
	}
	got := Compare(recorded, found)
	want := map[string]string{
		"shop.gone":     "missing from the restored copy",
		"shop.log":      "engine MyISAM in the restored copy, Aria recorded",
		"shop.unopened": "cannot open its definition",
	}
	if len(got) != len(want) {
		t.Fatalf("failures %v, want %d", got, len(want))
	}
	for _, f := range got {
		if w, ok := want[f.Table]; !ok || !strings.Contains(f.What, w) {
			t.Errorf("failure %q, want %q for %s", f, w, f.Table)
		}
	}
	if fs := Compare(recorded[:1], found); len(fs) != 0 {
		t.Errorf("a present table failed: %v", fs)
	}
}

func TestCheckResult(t *testing.T) {
	for _, c := range []struct {
		name string
		rows []CheckRow
		want string // "" OK, else a substring of the failure
	}{
		{"ok", []CheckRow{{"status", "OK"}}, ""},
		{"up to date", []CheckRow{{"status", "Table is already up to date"}}, ""},
		{"engine cannot check", []CheckRow{{"note", "The storage engine for the table doesn't support check"}}, ""},
		{"warning then OK", []CheckRow{{"warning", "1 client is using or hasn't closed the table properly"}, {"status", "OK"}}, ""},
		{"corrupt index", []CheckRow{{"Warning", "InnoDB: The B-tree of index k is corrupted."}, {"error", "Corrupt"}},
			"CHECK TABLE: warning: InnoDB: The B-tree of index k is corrupted.; error: Corrupt"},
		{"missing tablespace", []CheckRow{{"Error", "Tablespace is missing for table `d`.`t`"}, {"error", "Corrupt"}}, "Tablespace is missing"},
		{"operation failed", []CheckRow{{"status", "Operation failed"}}, "status: Operation failed"},
		{"no rows", nil, "returned nothing"},
	} {
		got := CheckResult(c.rows)
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: failed with %q, want OK", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: %q, want it to say %q", c.name, got, c.want)
		}
	}
}

func TestSummary(t *testing.T) {
	r := &Report{Backup: "20261128T171400Z", Restored: 12345 * time.Millisecond, Checked: 42, Checksummed: 5, Recorded: 40}
	if got, want := r.Summary(), "drill: backup 20261128T171400Z restored in 12.3s, server started, 42 tables checked (CHECK TABLE), 5 checksummed, 40 recorded tables compared: OK"; got != want {
		t.Errorf("summary\n%s\nwant\n%s", got, want)
	}
	r.Failures = []Failure{{"d.t", "CHECK TABLE: error: Corrupt"}, {"d.t", "x"}, {"d.u", "missing"}}
	if got := r.Summary(); !strings.HasSuffix(got, ": FAILED: 3 problems in d.t, d.u") {
		t.Errorf("summary %q does not name the tables", got)
	}
}

func TestSample(t *testing.T) {
	found := []mariadb.Table{{Schema: "mysql", Name: "user"}, {Schema: "sys", Name: "sys_config"}, {Schema: "a", Name: "1"}, {Schema: "a", Name: "2"}, {Schema: "b", Name: "3"}}
	s := Config{Sample: 2}.sample(found)
	if len(s) != 2 || s["mysql.user"] || s["sys.sys_config"] {
		t.Errorf("sample of 2 user tables: %v", s)
	}
	if s := (Config{Sample: 10}).sample(found); len(s) != 3 {
		t.Errorf("sample larger than the user tables: %v", s)
	}
	if s := (Config{Full: true}).sample(found); len(s) != len(found) {
		t.Errorf("full: %v, want every table", s)
	}
}
