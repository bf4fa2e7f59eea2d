//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestTableImportInterrupted: a table restore into the running server (the bank load
// running beside it) stopped by SIGINT, SIGTERM and SIGKILL at each step of the import
// (table-import=1 before the new table is created, 2 created, 3 its tablespace
// discarded and the exported files placed, 4 imported, 5 renamed into place). At every
// instant a reader sees filler.t whole: never missing, with the live rows or the
// backup's. After SIGINT or SIGTERM the live table has its checksum from before and
// nothing is left, on the server or beside its datadir; after SIGKILL the target is
// never half there (a --rename-to target does not exist), and the next run names and
// removes what the killed one left. A replace killed after its swap is complete, and
// the next run names the table it kept aside. The last runs complete with the
// backup's checksum.
func TestTableImportInterrupted(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 5000)
	src.Exec(t, "CREATE TABLE filler.parts (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB PARTITION BY HASH(id) PARTITIONS 2")
	src.Exec(t, "INSERT INTO filler.parts SELECT seq, seq * 2 FROM filler.seq_1_to_2000")
	// filler.t's pages on disk before the backup: a table restore of a tablespace
	// whose page 0 is still only in the redo fails today ("Tablespace is missing").
	conn, err := src.DB(t).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"FLUSH TABLES filler.t, filler.parts FOR EXPORT", "UNLOCK TABLES"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	load.Start()
	time.Sleep(500 * time.Millisecond)
	bk := filepath.Join(testdb.ShortDir(t), "bk")
	mustFerry(t, backupArgs(src, bk)...)
	sums := testdb.Checksums(t, src.DB(t), "filler")
	backup := sums["filler.t"]
	src.Exec(t, "DELETE FROM filler.t WHERE id > 4000")
	before := testdb.Checksums(t, src.DB(t), "filler")["filler.t"]
	stopReader := readWhole(t, src, "filler.t", "4000", "5000")

	base := []string{"restore", "--target-dir", bk, "--tables", "filler.t", "--into-server", "--socket", src.Socket, "--user", "root"}
	replace := append(append([]string{}, base...), "--replace-tables")
	rename := append(append([]string{}, base...), "--rename-to", "t_back")
	killedBefore := false
	sum := func(table string) string { return testdb.Checksums(t, src.DB(t), "filler")[table] }
	for _, c := range []struct {
		args  []string
		point string
		sig   syscall.Signal
	}{
		{replace, "table-import=2", syscall.SIGINT},
		{replace, "table-import=3", syscall.SIGTERM},
		{replace, "table-import=3", syscall.SIGKILL},
		{replace, "table-import=4", syscall.SIGKILL}, // this run meets the leftovers of the one before
		{replace, "table-import=4", syscall.SIGINT},
		{rename, "table-import=2", syscall.SIGKILL},
		{rename, "table-import=1", syscall.SIGTERM},
	} {
		what := c.sig.String() + " at " + c.point
		if c.args[len(c.args)-1] == "t_back" {
			what += " (--rename-to)"
		}
		cmd, log := pausedFerry(t, c.point, c.args...)
		last, err := signalled(t, cmd, log, c.sig)
		if err == nil {
			t.Fatalf("%s: ferry exited 0", what)
		}
		if b, _ := os.ReadFile(log); killedBefore && !strings.Contains(string(b), "left unfinished") {
			t.Errorf("%s: the run after a SIGKILL does not say it dropped the unfinished table:\n%s", what, tail(string(b), 8))
		}
		killedBefore = c.sig == syscall.SIGKILL
		if got := sum("filler.t"); got != before {
			t.Errorf("%s: filler.t checksum %s, want the live one from before %s", what, got, before)
		}
		if n := src.QueryString(t, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='filler' AND TABLE_NAME='t_back'"); n != "0" {
			t.Errorf("%s: the --rename-to target filler.t_back exists, unfinished", what)
		}
		if c.sig != syscall.SIGKILL {
			if !strings.Contains(last, "interrupted by") || !strings.Contains(last, "nothing of its restore is left") {
				t.Errorf("%s: last line %q", what, last)
			}
			if left := importLeftovers(t, src); len(left) > 0 {
				t.Errorf("%s left %v (last line %q)", what, left, last)
			}
		}
	}

	// A partitioned table killed inside its first partition's import (through a plain
	// table of ferry's, exchanged in), then restored beside.
	parts := []string{"restore", "--target-dir", bk, "--tables", "filler.parts", "--into-server", "--socket", src.Socket, "--user", "root", "--rename-to", "parts_back"}
	cmd, log := pausedFerry(t, "table-import=3", parts...)
	signalled(t, cmd, log, syscall.SIGKILL)
	if out := mustFerry(t, parts...); strings.Count(out.stderr, "left unfinished") != 2 {
		t.Errorf("the run after a SIGKILL in a partition's import does not name the two tables it dropped:\n%s", tail(out.stderr, 8))
	}
	if got := sum("filler.parts_back"); got != sums["filler.parts"] {
		t.Errorf("filler.parts_back checksum %s, the backup's filler.parts %s", got, sums["filler.parts"])
	}

	// Completed runs: beside (--rename-to), then a replace killed after its swap, and
	// one more replace that names the table the killed one kept aside.
	mustFerry(t, rename...)
	if got := sum("filler.t_back"); got != backup {
		t.Errorf("filler.t_back checksum %s, the backup's %s", got, backup)
	}
	cmd, log = pausedFerry(t, "table-import=5", replace...)
	signalled(t, cmd, log, syscall.SIGKILL)
	if got := sum("filler.t"); got != backup {
		t.Errorf("a replace killed after its swap: filler.t checksum %s, want the backup's %s", got, backup)
	}
	aside := asideTables(t, src)
	if len(aside) != 1 || sum("filler."+aside[0]) != before {
		t.Fatalf("a replace killed after its swap kept aside %v, want one table with the live rows from before", aside)
	}
	out := mustFerry(t, replace...)
	if !strings.Contains(out.stderr, "filler."+aside[0]) {
		t.Errorf("the run after a replace killed after its swap does not name filler.%s:\n%s", aside[0], tail(out.stderr, 10))
	}
	if got := sum("filler.t"); got != backup {
		t.Errorf("filler.t checksum %s after the replace, want the backup's %s", got, backup)
	}
	if n := len(asideTables(t, src)); n != 2 {
		t.Errorf("%d tables kept aside after two replaces, want 2", n)
	}
	if left := importLeftovers(t, src); len(left) > 0 {
		t.Errorf("the completed runs left %v", left)
	}
	stopReader()
	load.Stop(t)
	load.Check(t, src.DB(t), src.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos"))
}

// readWhole reads table in a loop until the returned func is called, and fails the
// test if a read fails (the table missing, or half imported) or counts other rows
// than one of counts.
func readWhole(t *testing.T, s *testdb.Server, table string, counts ...string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	db := s.DB(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for reads := 0; ctx.Err() == nil; reads++ {
			var n string
			err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n)
			mu.Lock()
			switch {
			case ctx.Err() != nil:
			case err != nil:
				bad = append(bad, err.Error())
			case !slices.Contains(counts, n):
				bad = append(bad, n+" rows")
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		if len(bad) > 0 {
			t.Errorf("a reader of %s saw %d bad reads, the first: %v", table, len(bad), bad[0])
		}
	}
}

// asideTables are the live tables a replace of filler.t kept aside.
func asideTables(t testing.TB, s *testdb.Server) []string {
	t.Helper()
	rows, err := s.DB(t).Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='filler' AND TABLE_NAME LIKE 't\\_ferry\\_old\\_%' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, n)
	}
	return out
}

// importLeftovers lists what a table restore may leave: tables on the server named by
// ferry other than the replaced ones kept aside, files in filler's directory that
// belong to no table, and ferry's files beside the datadir.
func importLeftovers(t testing.TB, s *testdb.Server) []string {
	t.Helper()
	var out []string
	rows, err := s.DB(t).Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='filler' AND TABLE_NAME LIKE '%ferry%' AND TABLE_NAME NOT LIKE 't\\_ferry\\_old\\_%'")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]bool{}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, "table filler."+n)
	}
	rows.Close()
	rows, err = s.DB(t).Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='filler'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables[n] = true
	}
	rows.Close()
	ents, _ := os.ReadDir(filepath.Join(s.Datadir, "filler"))
	for _, e := range ents {
		stem, _, _ := strings.Cut(e.Name(), ".")
		stem, _, _ = strings.Cut(stem, "#P#")
		if !tables[stem] && e.Name() != "db.opt" {
			out = append(out, "file "+filepath.Join("filler", e.Name()))
		}
	}
	ents, _ = os.ReadDir(filepath.Dir(filepath.Clean(s.Datadir)))
	for _, e := range ents {
		if strings.Contains(e.Name(), "ferry") {
			out = append(out, "beside the datadir: "+e.Name())
		}
	}
	return out
}
