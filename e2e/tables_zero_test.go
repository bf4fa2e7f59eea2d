//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestRestoreTableNeverFlushed: filler.t is created and filled after the source's last
// checkpoint and backed up, under the bank and DDL load, before any of its pages is
// flushed: its .ibd in the backup is all zeros and only the redo holds it. The table
// restore recovers a copy without the other tables, some of which the redo creates
// too; recovery used to stop building the never-flushed tablespaces at the first of
// those missing ones, and the export failed with "Tablespace is missing for a table".
// filler.t now comes back with the checksum it had at the backup.
func TestRestoreTableNeverFlushed(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{LogFileSize: "256M", ServerID: 1,
		Args: []string{"--innodb-max-dirty-pages-pct=99", "--innodb-max-dirty-pages-pct-lwm=0", "--innodb-adaptive-flushing=OFF"}}, 4, 20000)
	want := testdb.Checksums(t, src.DB(t), "filler")["filler.t"] // the load does not write filler
	load.Start()
	time.Sleep(time.Second)
	bk := filepath.Join(testdb.ShortDir(t), "bk")
	mustFerry(t, backupArgs(src, bk)...)
	load.Stop(t)
	ibd, err := os.ReadFile(filepath.Join(bk, "filler", "t.ibd"))
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.Trim(ibd, "\x00")) != 0 {
		t.Fatalf("the source flushed filler.t before the backup copied it: the test needs its .ibd all zeros")
	}

	src.Exec(t, "DROP TABLE filler.t")
	out := mustFerry(t, "restore", "--target-dir", bk, "--tables", "filler.t", "--into-server", "--socket", src.Socket, "--user", "root")
	if !strings.Contains(out.stderr, "restoring only the files the tables need") {
		t.Errorf("the table restore copied the whole backup:\n%s", tail(out.stderr, 10))
	}
	if got := testdb.Checksums(t, src.DB(t), "filler")["filler.t"]; got != want {
		t.Errorf("filler.t restored from a backup holding only its redo has checksum %q, want %q", got, want)
	}
	leftovers(t, src)
}
