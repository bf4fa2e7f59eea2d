package backup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
)

func TestPlanSegments(t *testing.T) {
	const page = 16384
	segs := planSegments(10*page, 4*page, page)
	if len(segs) != 3 || segs[0].off != 0 || segs[1].off != 4*page || segs[2].off != 8*page || segs[2].len != -1 {
		t.Fatalf("segments %+v", segs)
	}
	if s := planSegments(0, 4*page, page); len(s) != 1 || s[0].len != -1 {
		t.Fatalf("empty file: %+v", s)
	}
	if s := planSegments(8*page, 4*page, page); len(s) != 2 || s[1].off != 4*page {
		t.Fatalf("exact multiple: %+v", s)
	}
}

func TestScanServerClassifiesFiles(t *testing.T) {
	dd := t.TempDir()
	for _, f := range []string{
		"ibdata1", "undo001", "ib_logfile0", "ibtmp1", "ib_buffer_pool", "aria_log_control", "aria_log.00000001",
		"mysql-bin.000001", "mysql-bin.index", "x.pid",
		"shop/db.opt", "shop/t.frm", "shop/t.ibd", "shop/m.MYD", "shop/m.MYI", "shop/#sql-1a2b.ibd",
		"mysql/user.frm", "mysql/global_priv.MAD", "mysql/global_priv.MAI", "mysql/innodb_table_stats.ibd",
		"mysql/general_log.CSV", "#innodb_temp/temp_1.ibt",
	} {
		p := filepath.Join(dd, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, make([]byte, 16384), 0o644)
	}
	info := mariadb.Info{Datadir: dd, PageSize: 16384, Vars: map[string]string{
		"innodb_data_file_path": "ibdata1:12M:autoextend", "innodb_undo_tablespaces": "1", "innodb_undo_directory": "./",
	}}
	p, err := scanServer(info, MariaDBLayout())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"innodb":  {"ibdata1", "undo001", "mysql/innodb_table_stats.ibd", "shop/t.ibd"},
		"ddl":     {"mysql/user.frm", "shop/db.opt", "shop/m.MYD", "shop/m.MYI", "shop/t.frm"},
		"commit":  {"mysql/general_log.CSV", "mysql/global_priv.MAD", "mysql/global_priv.MAI"},
		"control": {"aria_log_control"},
		"logs":    {"aria_log.00000001"},
	}
	got := map[string][]srcFile{"innodb": p.InnoDB, "ddl": p.DDLStable, "commit": p.Commit, "control": p.AriaControl, "logs": p.AriaLogs}
	for k, names := range want {
		set := map[string]bool{}
		for _, f := range got[k] {
			set[f.Rel] = true
		}
		for _, n := range names {
			if !set[n] {
				t.Errorf("%s: missing %s (got %v)", k, n, set)
			}
		}
		if len(set) != len(names) {
			t.Errorf("%s: got %v, want exactly %v", k, set, names)
		}
	}
}

func TestSummarizeDDL(t *testing.T) {
	e := summarize([]redo.FileOp{
		{Kind: redo.FileCreate, SpaceID: 9, Name: "./db/#sql-alter-1.ibd"},
		{Kind: redo.FileRename, SpaceID: 5, Name: "./db/t.ibd", NewName: "./db/#sql-ib5.ibd"},
		{Kind: redo.FileRename, SpaceID: 9, Name: "./db/#sql-alter-1.ibd", NewName: "./db/t.ibd"},
		{Kind: redo.FileDelete, SpaceID: 5, Name: "./db/#sql-ib5.ibd"},
		{Kind: redo.FileRename, SpaceID: 7, Name: "./db/a.ibd", NewName: "./db/b.ibd"},
	})
	if !e.created[9] || !e.deleted[5] || e.created[7] || e.deleted[7] {
		t.Fatalf("created %v deleted %v", e.created, e.deleted)
	}
	if e.renamed[7] != "db/b.ibd" || e.renamed[9] != "db/t.ibd" {
		t.Fatalf("renamed %v", e.renamed)
	}
	if rel, ok := relName("./db/t.ibd"); !ok || rel != "db/t.ibd" {
		t.Fatalf("relName = %q %v", rel, ok)
	}
	if rel, ok := relName("/data/remote/db/t.ibd"); !ok || rel != "db/t.ibd" {
		t.Fatalf("a DATA DIRECTORY name is stored as db/t.ibd beside its .isl, got %q %v", rel, ok)
	}
}
