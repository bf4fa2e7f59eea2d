//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestPartialBackup: a partial backup (--databases, --exclude) taken under the bank,
// non-InnoDB and DDL load holds the selected tables only; restored as a datadir it
// starts, the bank's invariants hold at the backup's GTID and a left-out table is
// missing, not damaged; restored table by table into the running source, its rows are
// the backup's. mariadb-backup's partial backup restores with ferry as well.
func TestPartialBackup(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{}, 4, 20000)
	load.Start()
	time.Sleep(time.Second)
	tmp := testdb.ShortDir(t)
	bk := filepath.Join(tmp, "bk")
	mustFerry(t, backupArgs(src, bk, "--databases", "bank filler", "--exclude", `^filler\.t$`, "--max-rate", "20M")...)
	time.Sleep(500 * time.Millisecond)
	load.Stop(t)

	for path, want := range map[string]bool{"bank/ledger.ibd": true, "bank/accounts.ibd": true, "mysql/global_priv.MAI": true, "ibdata1": true,
		"filler/t.ibd": false, "mix/myisam.MYD": false, "mix/innodb_pc.ibd": false} {
		if _, err := os.Stat(filepath.Join(bk, path)); (err == nil) != want {
			t.Errorf("%s in the partial backup: %v, want present=%v", path, err, want)
		}
	}
	m := readManifest(t, bk)
	if m.Partial == nil || strings.Join(m.Partial.Databases, " ") != "bank filler" || m.Partial.Exclude != `^filler\.t$` {
		t.Errorf("manifest partial = %+v", m.Partial)
	}
	if b, _ := os.ReadFile(filepath.Join(bk, "xtrabackup_info")); !strings.Contains(string(b), "partial = Y") {
		t.Errorf("xtrabackup_info does not say partial = Y:\n%s", b)
	}

	datadir := filepath.Join(tmp, "restored")
	mustFerry(t, "restore", "--target-dir", bk, "--datadir", datadir)
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	gtid := testdb.GTIDForDomain(m.Coordinates.GTIDBinlogPos, 7)
	load.Bank.Check(t, rep.DB(t), gtid)
	if _, err := rep.DB(t).Exec("SELECT COUNT(*) FROM filler.t"); err == nil {
		t.Error("filler.t, left out of the backup, can be read on the restored server")
	}
	rows := rep.QueryString(t, "SELECT COUNT(*) FROM bank.ledger")
	rep.Stop(t)

	mustFerry(t, "restore", "--target-dir", bk, "--tables", "bank.ledger", "--rename-to", "ledger_partial", "--into-server", "--socket", src.Socket, "--user", "root")
	if got := src.QueryString(t, "SELECT COUNT(*) FROM bank.ledger_partial"); got != rows {
		t.Errorf("bank.ledger_partial has %s rows, the partial backup's ledger %s", got, rows)
	}
	wantFail(t, nil, "regular expression", backupArgs(src, filepath.Join(tmp, "bad"), "--tables", "(")...)

	// mariadb-backup's own partial backup, taken under the load, restores too: recovery
	// leaves out what it left out (it keeps the mysql schema only when told).
	load.Start()
	time.Sleep(time.Second)
	mb := filepath.Join(tmp, "mb")
	if out, err := exec.Command("mariadb-backup", "--backup", "--socket="+src.Socket, "--user=root", "--databases=mysql bank", "--target-dir="+mb).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --backup --databases: %v\n%s", err, tail(string(out), 20))
	}
	load.Stop(t)
	if _, err := os.Stat(filepath.Join(mb, "filler")); err == nil {
		t.Fatal("mariadb-backup --databases copied filler: the case would not be partial")
	}
	info, _ := os.ReadFile(filepath.Join(mb, "xtrabackup_binlog_info"))
	f := strings.Fields(string(info))
	if len(f) < 3 {
		t.Fatalf("mariadb-backup's xtrabackup_binlog_info: %q", info)
	}
	mbDir := filepath.Join(tmp, "mb-restored")
	mustFerry(t, "restore", "--target-dir", mb, "--datadir", mbDir)
	mbSrv := testdb.Start(t, testdb.Options{Datadir: mbDir, ServerID: 3})
	load.Bank.Check(t, mbSrv.DB(t), testdb.GTIDForDomain(f[2], 7))
	mbSrv.Stop(t)
}
