//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestRestoreTables: single tables of a backup taken under the bank, non-InnoDB and DDL
// load come back into the running source. bank.ledger under a new name beside the live
// one, with the backup's rows and checksum; a dropped table; a partitioned table whose
// rows were deleted, replaced (the live one kept aside). Every other table keeps its
// checksum. Aria and MyISAM tables come back too, and tables from a repository, a
// stream and an incremental chain. Refused in one line, with nothing changed: a live
// table without --replace-tables, a live table whose schema changed since, a table the
// backup lacks, a table of another engine.
func TestRestoreTables(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	src, load := loadedSource(t, testdb.Options{}, 4, 20000)
	src.Exec(t, "CREATE TABLE filler.parts (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB PARTITION BY HASH(id) PARTITIONS 3")
	src.Exec(t, "INSERT INTO filler.parts SELECT seq, seq * 2 FROM filler.seq_1_to_3000")
	load.Start()
	time.Sleep(time.Second)
	tmp := testdb.ShortDir(t)
	bk := filepath.Join(tmp, "bk")
	mustFerry(t, backupArgs(src, bk, "--max-rate", "20M")...)

	// What the backup holds: a full restore of it, started aside (while the load goes on).
	full := filepath.Join(tmp, "full")
	mustFerry(t, "restore", "--target-dir", bk, "--datadir", full)
	ref := testdb.Start(t, testdb.Options{Datadir: full, ServerID: 9})
	want := testdb.Checksums(t, ref.DB(t))
	wantRows := ref.QueryString(t, "SELECT COUNT(*) FROM bank.ledger")
	ref.Stop(t)

	// bank.ledger back beside the live one, under the load.
	into := []string{"--target-dir", bk, "--into-server", "--socket", src.Socket, "--user", "root"}
	restoreTables := func(extra ...string) result {
		return mustFerry(t, append(append([]string{"restore"}, into...), extra...)...)
	}
	fillerBefore := testdb.Checksums(t, src.DB(t), "filler")
	out := restoreTables("--tables", "bank.ledger", "--rename-to", "ledger_restored")
	if !strings.Contains(out.stdout, "Restored bank.ledger into bank.ledger_restored") {
		t.Errorf("restore printed:\n%s", out.stdout)
	}
	if !strings.Contains(out.stderr, "restoring only the files the tables need") {
		t.Errorf("the table restore copied the whole backup:\n%s", tail(out.stderr, 10))
	}
	time.Sleep(500 * time.Millisecond)
	load.Stop(t)
	if got := src.QueryString(t, "SELECT COUNT(*) FROM bank.ledger_restored"); got != wantRows {
		t.Errorf("bank.ledger_restored has %s rows, the backup's ledger %s", got, wantRows)
	}
	if wantRows == src.QueryString(t, "SELECT COUNT(*) FROM bank.ledger") {
		t.Fatalf("the load wrote no transfer after the backup: the test would not tell the backup's ledger from the live one")
	}
	now := testdb.Checksums(t, src.DB(t))
	if now["bank.ledger_restored"] != want["bank.ledger"] {
		t.Errorf("bank.ledger_restored checksum %s, the backup's ledger %s", now["bank.ledger_restored"], want["bank.ledger"])
	}
	// The live tables: the load's invariants hold on them up to its last transfer, and
	// the tables it does not write are as they were.
	load.Check(t, src.DB(t), src.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos"))
	compareChecksums(t, fillerBefore, testdb.Checksums(t, src.DB(t), "filler"))
	leftovers(t, src)

	refuse := func(want string, extra ...string) {
		t.Helper()
		before := testdb.Checksums(t, src.DB(t))
		wantFail(t, nil, want, append(append([]string{"restore"}, into...), extra...)...)
		compareChecksums(t, before, testdb.Checksums(t, src.DB(t)))
		leftovers(t, src)
	}

	// A dropped table comes back as it was in the backup.
	src.Exec(t, "DROP TABLE filler.t")
	restoreTables("--tables", "filler.t")
	if got := testdb.Checksums(t, src.DB(t), "filler")["filler.t"]; got != want["filler.t"] {
		t.Errorf("the dropped filler.t came back with checksum %s, want %s", got, want["filler.t"])
	}

	// A partitioned table replaced; the live one is kept aside.
	src.Exec(t, "DELETE FROM filler.parts WHERE id <= 1000")
	refuse("exists on the server", "--tables", "filler.parts")
	out = restoreTables("--tables", "filler.parts", "--replace-tables")
	if got := testdb.Checksums(t, src.DB(t), "filler")["filler.parts"]; got != want["filler.parts"] {
		t.Errorf("the replaced filler.parts has checksum %s, want %s", got, want["filler.parts"])
	}
	aside := src.QueryString(t, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='filler' AND TABLE_NAME LIKE 'parts_ferry_old_%'")
	if n := src.QueryString(t, "SELECT COUNT(*) FROM filler.`"+aside+"`"); n != "2000" {
		t.Errorf("the replaced table kept aside as %q has %s rows, want the 2000 left before", aside, n)
	}
	if !strings.Contains(out.stdout, "kept as filler."+aside) {
		t.Errorf("restore did not say where the replaced table is:\n%s", out.stdout)
	}

	// Aria and MyISAM tables, copied into place under a lock.
	for _, tb := range []string{"myisam", "aria_tx", "aria_ntx"} {
		restoreTables("--tables", "mix."+tb, "--rename-to", tb+"_restored")
		if got := testdb.Checksums(t, src.DB(t), "mix")["mix."+tb+"_restored"]; got != want["mix."+tb] {
			t.Errorf("mix.%s_restored checksum %s, the backup's mix.%s %s", tb, got, tb, want["mix."+tb])
		}
	}

	// From a repository, a stream and an incremental chain (the load stopped: the
	// backups hold the live rows).
	repoDir := filepath.Join(tmp, "repo")
	dirRepoBackup(t, src, repoDir)
	liveAccounts := testdb.Checksums(t, src.DB(t), "bank")["bank.accounts"]
	mustFerry(t, "restore", "--repo", repoDir, "latest", "--tables", "bank.accounts", "--rename-to", "accounts_from_repo",
		"--into-server", "--socket", src.Socket, "--user", "root")
	xbs := filepath.Join(tmp, "b.xbs")
	streamToFile(t, []string{"backup", "--socket", src.Socket, "--user", "root", "--stream"}, xbs)
	res := mustFerry(t, "restore", "--from", xbs, "--tables", "bank.accounts", "--rename-to", "accounts_from_stream",
		"--into-server", "--socket", src.Socket, "--user", "root")
	if !strings.Contains(res.stderr, "writing only the files the tables need") {
		t.Errorf("the table restore from a stream wrote every file:\n%s", tail(res.stderr, 10))
	}
	inc := filepath.Join(tmp, "inc")
	mustFerry(t, backupArgs(src, inc, "--incremental-basedir", bk)...)
	mustFerry(t, "restore", "--target-dir", bk, "--incremental-dir", inc, "--tables", "bank.accounts", "--rename-to", "accounts_from_chain",
		"--into-server", "--socket", src.Socket, "--user", "root")
	sums := testdb.Checksums(t, src.DB(t), "bank")
	for _, n := range []string{"bank.accounts_from_repo", "bank.accounts_from_stream", "bank.accounts_from_chain"} {
		if sums[n] != liveAccounts {
			t.Errorf("%s checksum %s, want the live bank.accounts' %s", n, sums[n], liveAccounts)
		}
	}

	src.Exec(t, "ALTER TABLE bank.counter ADD COLUMN note INT NULL")
	refuse("not defined as bank.counter in the backup", "--tables", "bank.counter", "--replace-tables")
	refuse("bank.nope is not in the backup", "--tables", "bank.nope", "--rename-to", "nope2")
	refuse("is a CSV table", "--tables", "mysql.general_log", "--rename-to", "general_log2")
	refuse("name each table as database.table", "--tables", "ledger")
	refuse("--datadir does not apply", "--tables", "bank.ledger", "--rename-to", "x", "--datadir", filepath.Join(tmp, "d"))
}

// leftovers fails on scratch directories a table restore left beside the datadir.
func leftovers(t testing.TB, s *testdb.Server) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Dir(filepath.Clean(s.Datadir)))
	for _, e := range ents {
		if strings.Contains(e.Name(), "ferry-table") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
