package tableimport

import (
	"strings"
	"testing"
)

// TestParseList: database.table names, deduplicated; anything else refused.
func TestParseList(t *testing.T) {
	got, err := ParseList(" shop.orders, shop.order_items,shop.orders ")
	if err != nil || len(got) != 2 || got[0] != (Name{"shop", "orders"}) || got[1] != (Name{"shop", "order_items"}) {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "orders", "shop.", ".orders", "shop.or-ders", "../etc.passwd", "shop.a/b", "shop." + strings.Repeat("x", 65)} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) accepted", bad)
		}
	}
	if n, err := ParseTarget("old", Name{"shop", "orders"}); err != nil || n != (Name{"shop", "old"}) {
		t.Errorf("ParseTarget(old) = %v, %v", n, err)
	}
	if n, err := ParseTarget("arch.old", Name{"shop", "orders"}); err != nil || n != (Name{"arch", "old"}) {
		t.Errorf("ParseTarget(arch.old) = %v, %v", n, err)
	}
	if _, err := ParseTarget("a.b.c", Name{"shop", "orders"}); err == nil {
		t.Error("ParseTarget(a.b.c) accepted")
	}
}

// TestShortName: names ferry makes stay within MariaDB's 64 characters.
func TestShortName(t *testing.T) {
	n := shortName("ferry_new_", strings.Repeat("t", 64), "_20261125221809")
	if len(n) != 64 || !strings.HasPrefix(n, "ferry_new_ttt") || !strings.HasSuffix(n, "_20261125221809") {
		t.Errorf("shortName = %q (%d)", n, len(n))
	}
}

// TestPartitions: partitions come from the exported .ibd names; subpartitions refused.
func TestPartitions(t *testing.T) {
	it := &item{from: Name{"d", "t"}, files: []string{"/w/t#P#p0.ibd", "/w/t#P#p0.cfg", "/w/t#P#p1.ibd", "/w/t#P#p1.cfg"}}
	p, err := partitions(it)
	if err != nil || strings.Join(p, ",") != "p0,p1" {
		t.Errorf("partitions = %v, %v", p, err)
	}
	it.files = []string{"/w/t.ibd", "/w/t.cfg"}
	if p, err := partitions(it); err != nil || len(p) != 0 {
		t.Errorf("plain table: partitions = %v, %v", p, err)
	}
	it.files = []string{"/w/t#P#p0#SP#p0sp0.ibd"}
	if _, err := partitions(it); err == nil {
		t.Error("a subpartition was accepted")
	}
}

// TestWants: a table restore takes the system files, the mysql schema and the tables'
// own files, and leaves every other table in the backup.
func TestWants(t *testing.T) {
	j := &Job{items: []*item{{from: Name{"shop", "orders"}}, {from: Name{"shop", "parts"}}}}
	for path, want := range map[string]bool{
		"ibdata1": true, "undo001": true, "ib_logfile0": true, "ferry_manifest.json": true, "aria_log.00000001": true,
		"mysql/user.MAI": true, "mysql/innodb_index_stats.ibd": true,
		"shop/db.opt": true, "shop/orders.frm": true, "shop/orders.ibd": true, "shop/orders.isl": true,
		"shop/parts#P#p0.ibd": true, "shop/parts.frm": true,
		"shop/orders_old.ibd": false, "shop/order.ibd": false, "shop/other.frm": false, "bank/orders.ibd": false,
		"shop/ordersx#P#p0.ibd": false,
	} {
		if got := j.Wants(path); got != want {
			t.Errorf("Wants(%q) = %v, want %v", path, got, want)
		}
	}
}
