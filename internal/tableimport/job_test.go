package tableimport

import (
	"strings"
	"testing"
)

// TestCheckBackup: a table is refused before any data moves when the backup's file
// list lacks it, or holds only its definition; a table whose tablespace, partitions,
// delta or Aria files are listed passes, and Wants picks the same files.
func TestCheckBackup(t *testing.T) {
	paths := []string{"ibdata1", "mysql/user.MAD", "shop/db.opt", "shop/orders.frm", "shop/orders.ibd",
		"shop/parts.frm", "shop/parts#P#p0.ibd", "shop/parts#P#p1.ibd", "shop/inc.frm", "shop/inc.ibd.delta", "shop/inc.ibd.meta",
		"shop/log.frm", "shop/log.MAD", "shop/log.MAI", "shop/mem.frm", "shop/orders_old.ibd", "mysql/general_log.frm", "mysql/general_log.CSV", "mysql/general_log.CSM"}
	job := func(names ...string) *Job {
		j := &Job{}
		for _, n := range names {
			db, tb, _ := strings.Cut(n, ".")
			j.items = append(j.items, &item{from: Name{db, tb}})
		}
		return j
	}
	if err := job("shop.orders", "shop.parts", "shop.inc", "shop.log").CheckBackup(paths, "/b"); err != nil {
		t.Errorf("tables the backup holds refused: %v", err)
	}
	for names, want := range map[string]string{
		"shop.nosuch":               "shop.nosuch is not in the backup /b: check the database and table names",
		"shop.orders,nodb.t,shop.x": "nodb.t, shop.x are not in the backup /b",
		"shop.mem":                  "the backup /b holds no InnoDB, Aria or MyISAM data file of shop.mem",
		"mysql.general_log":         "mysql.general_log is a CSV table: ferry restores InnoDB, Aria and MyISAM tables",
		"shop.order":                "shop.order is not in the backup",
	} {
		err := job(strings.Split(names, ",")...).CheckBackup(paths, "/b")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", names, err, want)
		}
	}
	j := job("shop.parts")
	for p, want := range map[string]bool{"shop/parts#P#p1.ibd": true, "shop/db.opt": true, "shop/orders.ibd": false, "ibdata1": true, "other/parts.ibd": false} {
		if j.Wants(p) != want {
			t.Errorf("Wants(%s) = %v", p, !want)
		}
	}
}
