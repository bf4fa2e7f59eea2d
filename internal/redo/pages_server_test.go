//go:build e2e

package redo

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPagesTrackedMatchPageLSNs checks the page tracking against the server itself:
// while the tailer copies the redo of updates, inserts and a table rebuild, it records
// pages; then SET GLOBAL innodb_log_checkpoint_now=ON makes the (now idle) server write
// every dirty page and a checkpoint at or past the copy's end, and every page on disk
// whose FIL_PAGE_LSN is above the copy's start checkpoint must be in the set.
func TestPagesTrackedMatchPageLSNs(t *testing.T) {
	s := startServer(t, "8M")
	loadSetup(t, s)
	s.exec(t, "CREATE TABLE d.idle (id INT PRIMARY KEY, pad VARCHAR(255)) ENGINE=InnoDB")
	s.exec(t, "INSERT INTO d.idle SELECT seq, REPEAT('z', 200) FROM d.seq_1_to_3000")
	s.exec(t, "SET GLOBAL innodb_log_checkpoint_now=ON")
	pages := NewPageSet(0)
	tl, err := Open(Config{Path: s.logPath(), Out: new(bytes.Buffer), Server: s, Pages: pages, OnFileOp: func(FileOp) {}})
	if err != nil {
		t.Fatal(err)
	}
	start := tl.Start().LSN
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := runTailer(ctx, tl)
	for i := range 6 {
		if err := update(s, i); err != nil {
			t.Fatal(err)
		}
	}
	s.exec(t, "INSERT INTO d.t SELECT seq, REPEAT('n', 100) FROM d.seq_5001_to_7000")
	s.exec(t, "UPDATE d.idle SET pad = 'touched' WHERE id = 1500")
	s.exec(t, "ALTER TABLE d.t ADD COLUMN extra INT NOT NULL DEFAULT 7, FORCE")
	end := stopAtCurrent(ctx, t, s, tl, done)
	s.exec(t, "SET GLOBAL innodb_log_checkpoint_now=ON")
	cp, err := NewestCheckpoint(s.logPath())
	if err != nil {
		t.Fatal(err)
	}
	if cp.LSN < end {
		t.Fatalf("after innodb_log_checkpoint_now the checkpoint is at LSN %d, below the copy's end %d", cp.LSN, end)
	}
	taken, ok := pages.Take()
	if !ok {
		t.Fatal("the page set overflowed")
	}
	changed, missing := 0, []string{}
	for _, f := range []string{"ibdata1", "undo001", "undo002", "undo003", "d/t.ibd", "d/idle.ibd"} {
		for _, p := range pagesAbove(t, filepath.Join(s.Datadir, f), start) {
			changed++
			if !contains(taken[p.Space], p.Page) {
				missing = append(missing, fmt.Sprintf("%s space %d page %d", f, p.Space, p.Page))
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d pages changed since LSN %d are not in the tracked set: %s", len(missing), changed, start, strings.Join(missing[:min(20, len(missing))], "; "))
	}
	if changed < 100 {
		t.Fatalf("only %d pages changed on disk: the workload proves little", changed)
	}
	idle := spaceOf(t, filepath.Join(s.Datadir, "d/idle.ibd"))
	if n := len(taken[idle]); n == 0 || n > 4 {
		t.Errorf("d.idle had one row updated; the set holds %d of its pages", n)
	}
	t.Logf("%d pages changed on disk since LSN %d, all among the %d tracked", changed, start, countPages(taken))
}
