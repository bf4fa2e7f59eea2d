package backup

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// TestMySQLLayout: a MySQL datadir's tablespaces are found where MySQL keeps them, its
// redo, temporary and doublewrite files are left out, MyISAM files wait for the
// commit lock, and the end point copies the binlog up to its position.
func TestMySQLLayout(t *testing.T) {
	dd := t.TempDir()
	for f, size := range map[string]int{"ibdata1": 16384, "mysql.ibd": 16384, "ts1.ibd": 16384, "undo_001": 16384, "undo_002": 16384, "u3.ibu": 16384,
		"#ib_16384_0.dblwr": 100, "ibtmp1": 100, "auto.cnf": 10, "binlog.000001": 900, "binlog.index": 20, "#innodb_redo/#ib_redo7": 4096,
		"#innodb_temp/temp_1.ibt": 100, "shop/t.ibd": 16384, "shop/m.MYD": 10, "shop/m.MYI": 10, "shop/m_365.sdi": 10, "mysql/general_log.CSV": 0} {
		p := filepath.Join(dd, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	info := mariadb.Info{Family: mariadb.FamilyMySQL, Datadir: dd, PageSize: 16384, Vars: map[string]string{
		"innodb_data_file_path": "ibdata1:12M:autoextend", "innodb_undo_directory": "./", "log_bin_basename": filepath.Join(dd, "binlog")}}
	p, err := scanServer(info, mysqlLayout{})
	if err != nil {
		t.Fatal(err)
	}
	rels := func(fs []srcFile) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Rel)
		}
		sort.Strings(out)
		return out
	}
	if got := rels(p.InnoDB); !reflect.DeepEqual(got, []string{"ibdata1", "mysql.ibd", "shop/t.ibd", "ts1.ibd", "u3.ibu", "undo_001", "undo_002"}) {
		t.Errorf("InnoDB: %v", got)
	}
	if got := rels(p.Commit); !reflect.DeepEqual(got, []string{"mysql/general_log.CSV", "shop/m.MYD", "shop/m.MYI"}) {
		t.Errorf("under the commit lock: %v", got)
	}
	if got := rels(p.DDLStable); !reflect.DeepEqual(got, []string{"shop/m_365.sdi"}) {
		t.Errorf("DDL-stable: %v", got)
	}
	parts, made, err := mysqlLayout{}.endFiles(info, mariadb.Coordinates{BinlogFile: "binlog.000001", BinlogPos: 500})
	if err != nil || len(parts) != 1 || parts[0].Size != 500 || parts[0].Rel != "binlog.000001" || len(made) != 1 || string(made[0].Data) != "./binlog.000001\n" || made[0].Rel != "binlog.index" {
		t.Fatalf("end files: %+v %+v %v", parts, made, err)
	}
	if _, _, err := (mysqlLayout{}).endFiles(info, mariadb.Coordinates{BinlogFile: "binlog.000001", BinlogPos: 5000}); err == nil {
		t.Error("a position past the binlog's end was accepted")
	}
	if parts, made, err := (mysqlLayout{}).endFiles(info, mariadb.Coordinates{}); err != nil || parts != nil || made != nil {
		t.Errorf("no binlog: %v %v %v", parts, made, err)
	}
}
