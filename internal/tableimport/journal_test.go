package tableimport

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFerryName: the new table's name is one per target, within 64 characters, and
// two long names that share their first 54 characters stay apart.
func TestFerryName(t *testing.T) {
	if got := ferryName(newPrefix, "orders"); got != "ferry_new_orders" {
		t.Errorf("ferryName(orders) = %q", got)
	}
	long1, long2 := strings.Repeat("a", 60)+"_one", strings.Repeat("a", 60)+"_two"
	n1, n2 := ferryName(newPrefix, long1), ferryName(newPrefix, long2)
	if len(n1) > 64 || len(n2) > 64 || n1 == n2 || n1 != ferryName(newPrefix, long1) {
		t.Errorf("long names: %q, %q", n1, n2)
	}
	if !ferryMade(n1) || !ferryMade(ferryName(partPrefix, "p0")) || ferryMade("orders") {
		t.Error("ferryMade does not tell ferry's names")
	}
}

// TestJournal: a run's journal is locked: a second run into the same server is refused
// while it lasts and its directory kept; entries naming anything but ferry's own tables
// are refused before any statement.
func TestJournal(t *testing.T) {
	datadir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(datadir, 0o750); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	j := &Job{datadir: datadir, opt: Options{Log: log}}
	if err := j.startWork(); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(datadir), ".data.ferry-tables"); j.work != want {
		t.Errorf("work directory %s, want %s", j.work, want)
	}
	if err := j.note(noteTable, Name{"shop", "ferry_new_orders"}); err != nil {
		t.Fatal(err)
	}
	other := &Job{datadir: datadir, opt: Options{Log: log}}
	err := other.finishKilledRuns(context.Background())
	if err == nil || !strings.Contains(err.Error(), "another table restore into this server is running") {
		t.Errorf("a second run while the first holds its journal: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(j.work, journalFile))
	if string(b) != "table\tshop\tferry_new_orders\n" {
		t.Errorf("journal %q", b)
	}
	for _, e := range [][]string{{"table", "shop", "orders"}, {"table", "shop", "ferry_new_x;DROP"}, {"database", "a/b", ""}, {"what", "x", "y"}} {
		if err := other.undoEntry(context.Background(), e); err == nil {
			t.Errorf("entry %q accepted", e)
		}
	}
	j.journal.Close()
	if _, err := os.Stat(j.work); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(j.work)
}
