package backup

import (
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// TestFilter: --databases, --tables and --exclude select tables as mariadb-backup's do;
// files outside the databases, db.opt and the system schemas always stay.
func TestFilter(t *testing.T) {
	f, err := NewFilter("shop bank.ledger", `^(shop|bank)\.`, `^shop\.tmp_|^shop\.log$`)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		"ibdata1": true, "undo001": true, "mysql/user.MAI": true, "sys/sys_config.ibd": true, "other/db.opt": true,
		"shop/orders.ibd": true, "shop/orders.frm": true, "shop/parts#P#p0.ibd": true, "shop/parts#p#p1.ibd": true,
		"shop/tmp_x.ibd": false, "shop/log.MYD": false, "shop/logs.MYD": true,
		"bank/ledger.ibd": true, "bank/accounts.ibd": false, "other/t.ibd": false,
	} {
		if got := f.keep(rel); got != want {
			t.Errorf("keep(%q) = %v, want %v", rel, got, want)
		}
	}
	if f, err := NewFilter("", "", ""); f != nil || err != nil {
		t.Errorf("no options: %v, %v; want no filter", f, err)
	}
	for _, bad := range [][3]string{{"a.b.c", "", ""}, {"", "(", ""}, {"", "", "["}, {"../x", "", ""}} {
		if _, err := NewFilter(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("NewFilter%q accepted", bad)
		}
	}
	p := f.apply(plan{InnoDB: []srcFile{{Rel: "ibdata1", System: true}, {Rel: "bank/accounts.ibd"}, {Rel: "bank/ledger.ibd"}}})
	if len(p.InnoDB) != 2 || p.InnoDB[1].Rel != "bank/ledger.ibd" {
		t.Errorf("apply kept %v", p.InnoDB)
	}
	ts := []mariadb.Table{{Schema: "bank", Name: "accounts"}, {Schema: "bank", Name: "ledger"}, {Schema: "mysql", Name: "user"}, {Schema: "shop", Name: "log"}}
	if got := f.keepTables(ts); len(got) != 2 || got[0].Name != "ledger" || got[1].Name != "user" {
		t.Errorf("keepTables kept %v, want the backup's tables and the system schemas'", got)
	}
	if got := (*Filter)(nil).keepTables(ts); len(got) != len(ts) {
		t.Errorf("no filter kept %v", got)
	}
}
