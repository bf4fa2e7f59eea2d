package pitr

import (
	"context"
	"errors"
	"github.com/ferry-backup/ferry/internal/storage"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/repo"
)

var t0 = time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)

func backup(id string, hours int, file string, pos uint64, state string) repo.Entry {
	return repo.Entry{ID: id, Manifest: &manifest.Manifest{ID: id, EndTime: t0.Add(time.Duration(hours) * time.Hour),
		Coordinates: mariadb.Coordinates{BinlogFile: file, BinlogPos: pos, GTIDBinlogState: state, GTIDBinlogPos: state}}}
}

func gtid(t *testing.T, s string) *binlog.GTID {
	g, err := binlog.ParseGTID(s)
	if err != nil {
		t.Fatal(err)
	}
	return &g
}

func TestChoose(t *testing.T) {
	entries := []repo.Entry{
		backup("a", 0, "b.000002", 100, "0-1-100"),
		backup("b", 24, "b.000005", 200, "0-1-900,7-1-5"),
		{ID: "running"}, // unfinished: no manifest
		backup("nobinlog", 30, "", 0, ""),
	}
	entries[1].Manifest.EndTime = entries[1].Manifest.EndTime.Add(700 * time.Millisecond)
	for _, c := range []struct {
		target binlog.Target
		want   string
		err    string
	}{
		{binlog.Target{GTID: gtid(t, "0-1-500")}, "a", ""},
		{binlog.Target{GTID: gtid(t, "0-1-901")}, "b", ""},
		{binlog.Target{GTID: gtid(t, "7-1-6")}, "b", ""},
		{binlog.Target{GTID: gtid(t, "9-1-1")}, "b", ""}, // a domain no backup holds yet
		{binlog.Target{GTID: gtid(t, "0-1-100")}, "", "already in the oldest backup a"},
		{binlog.Target{Time: t0.Add(13 * time.Hour)}, "a", ""},
		{binlog.Target{Time: t0.Add(24 * time.Hour)}, "b", ""},
		// b ended at 02:00:00.7 the next day: printed (and binlog stamped) to the second,
		// 02:00:00 reaches it, 01:59:59 does not.
		{binlog.Target{Time: t0.Add(24*time.Hour - time.Second)}, "a", ""},
		{binlog.Target{Time: t0.Add(-time.Minute)}, "", "before the oldest backup a ended"},
	} {
		m, err := Choose(entries, c.target)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrNoBackup)):
			t.Errorf("%v: error %v, want %q", c.target, err, c.err)
		case c.err == "" && (err != nil || m.ID != c.want):
			t.Errorf("%v: chose %v (%v), want %s", c.target, m, err, c.want)
		}
	}
	if _, err := Choose([]repo.Entry{backup("x", 0, "", 0, "")}, binlog.Target{Time: t0}); !errors.Is(err, ErrNoBackup) {
		t.Errorf("no backup with a binlog position: %v", err)
	}
}

func TestWindows(t *testing.T) {
	ms := []*manifest.Manifest{backup("a", 0, "b.000002", 100, "").Manifest, backup("b", 24, "b.000007", 50, "").Manifest,
		backup("c", 48, "b.000008", 10, "").Manifest}
	last := &binlog.Group{GTID: binlog.GTID{Seq: 9}}
	s := &binlog.Summary{Files: 8, First: binlog.Position{File: "b.000001"}, End: binlog.Position{File: "b.000009", Pos: 500}, LastGroup: last,
		Gaps: []binlog.Gap{{After: binlog.Position{File: "b.000004", Pos: 77}, Resumed: binlog.Position{File: "b.000006", Pos: 4}}}}
	w := Windows(ms, s)
	if len(w) != 2 || w[0].From.ID != "a" || w[0].Gap == nil || w[0].To.File != "b.000004" ||
		w[1].From.ID != "b" || w[1].Last != last || w[1].To != s.End {
		t.Fatalf("windows: %+v", w)
	}
	// No backup after the gap: only the stretch before it is recoverable.
	if w := Windows(ms[:1], s); len(w) != 1 || w[0].Gap == nil {
		t.Fatalf("windows without a backup after the gap: %+v", w)
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	st, err := storage.Open(ctx, storage.Config{URL: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := binlog.Open(st, binlog.Options{})
	for _, f := range []string{"b.000001", "b.000002", "b.000003"} {
		for _, start := range []int64{0, 100} {
			if _, err := a.Put(ctx, f, start, make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.RecordGap(ctx, binlog.Gap{After: binlog.Position{File: "b.000001", Pos: 200}, Resumed: binlog.Position{File: "b.000002", Pos: 4}})
	a.RecordGap(ctx, binlog.Gap{After: binlog.Position{File: "b.000002", Pos: 200}, Resumed: binlog.Position{File: "b.000003", Pos: 4}})
	kept := []*manifest.Manifest{backup("new", 5, "b.000003", 50, "").Manifest, backup("old", 1, "b.000002", 150, "").Manifest}
	p, err := PlanPrune(ctx, a, kept)
	if err != nil {
		t.Fatal(err)
	}
	if p.Keeper != "old" || len(p.Files) != 1 || p.Files[0].File != "b.000001" || len(p.Gaps) != 1 || p.Bytes != 200 {
		t.Fatalf("plan: %+v", p)
	}
	if err := p.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	segs, _ := a.Segments(ctx)
	gaps, _ := a.Gaps(ctx)
	if len(segs) != 4 || segs[0].File != "b.000002" || len(gaps) != 1 || gaps[0].Resumed.File != "b.000003" {
		t.Fatalf("after expire: %d segments from %s, gaps %+v", len(segs), segs[0].File, gaps)
	}
	if p, _ := PlanPrune(ctx, a, nil); len(p.Files) != 0 {
		t.Fatal("no kept backup with a binlog position: expire must keep the archive")
	}
}
