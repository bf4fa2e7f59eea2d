package pitr

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/storage"
)

// TestExpireBinlogs: a dry run tells of the prune and returns the summary it would
// leave, deleting nothing; the real run deletes the same files and returns the same
// summary; with nothing left to prune it says nothing.
func TestExpireBinlogs(t *testing.T) {
	ctx := context.Background()
	st, err := storage.Open(ctx, storage.Config{URL: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := binlog.Open(st, binlog.Options{})
	for _, f := range []string{"mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"} {
		b, err := os.ReadFile(filepath.Join("..", "binlog", "testdata", f)) // real binlogs: the summary reads their events
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Put(ctx, f, 0, b); err != nil {
			t.Fatal(err)
		}
	}
	kept := []*manifest.Manifest{backup("old", 1, "mysql-bin.000002", 50, "").Manifest}
	run := func(dry bool) (*binlog.Summary, []string) {
		var told []string
		s, err := ExpireBinlogs(ctx, a, kept, ExpireOptions{DryRun: dry, Pruning: func(p *Prune) {
			for _, f := range p.Files {
				told = append(told, f.File)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		return s, told
	}
	dry, told := run(true)
	if len(told) != 1 || told[0] != "mysql-bin.000001" || dry.Files != 2 || dry.First.File != "mysql-bin.000002" {
		t.Fatalf("dry run: told %v, summary %+v", told, dry)
	}
	if segs, _ := a.Segments(ctx); len(segs) != 3 {
		t.Fatalf("the dry run deleted: %d segments left", len(segs))
	}
	real, told := run(false)
	if len(told) != 1 || real.Files != dry.Files || real.StoredBytes != dry.StoredBytes || real.First != dry.First {
		t.Fatalf("real run: told %v, summary %+v; the dry run said %+v", told, real, dry)
	}
	if _, told := run(false); len(told) != 0 {
		t.Fatalf("nothing left to prune, but told of %v", told)
	}
}
