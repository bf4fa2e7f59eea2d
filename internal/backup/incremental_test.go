package backup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// TestPagesOf: the redo's pages of the space, file-relative; a tablespace whose page 0
// carries an LSN between the base and the redo copy's start that the redo does not
// name (written without redo: an import) is scanned, as is every file without a map.
func TestPagesOf(t *testing.T) {
	s := &selection{from: 1000, upto: 5000, pages: map[uint32][]uint32{7: {0, 3, 9}, 0: {2, 70, 130}}}
	ij := func(space uint32, base uint32, lsn0 uint64, system bool) *innoJob {
		j := &innoJob{src: srcFile{Base: base, System: system}, lsn0: lsn0}
		j.header.SpaceID = space
		return j
	}
	cases := []struct {
		name string
		ij   *innoJob
		want []uint32
		scan bool
	}{
		{"named pages", ij(7, 0, 4000, false), []uint32{0, 3, 9}, false},
		{"untouched tablespace", ij(8, 0, 900, false), nil, false},
		{"page 0 changed without redo", ij(8, 0, 4000, false), nil, true},
		{"page 0 changed after the copy began", ij(8, 0, 6000, false), nil, false},
		{"second system file", ij(0, 64, 4000, true), []uint32{6, 66}, false},
	}
	for _, c := range cases {
		got, scan := s.pagesOf(c.ij)
		if scan != c.scan || !slices.Equal(got, c.want) {
			t.Errorf("%s: pages %v scan %v, want %v %v", c.name, got, scan, c.want, c.scan)
		}
	}
	if _, scan := (&selection{from: 1}).pagesOf(ij(7, 0, 0, false)); !scan {
		t.Error("without a changed-page map every file must be scanned")
	}
}

// TestBaseFromDir: a ferry base gives its start LSN as the pages' bound and its end as
// from_lsn; a ferry base prepared by ferry, an incomplete one and a directory that is
// no backup are refused; a prepared mariadb-backup base is exact up to its to_lsn.
func TestBaseFromDir(t *testing.T) {
	dir := t.TempDir()
	m := &manifest.Manifest{Format: 1, ID: "20261125t000000z-1", Type: manifest.TypeFull, StartLSN: 100, EndLSN: 900,
		Server: manifest.Server{UID: "uid-1"}}
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	b, err := BaseFromDir(dir)
	if err != nil || b.ID != m.ID || b.FromLSN != 100 || b.ToLSN != 900 || b.UID != "uid-1" {
		t.Fatalf("ferry base: %+v, %v", b, err)
	}
	m.Prepared = &manifest.Prepared{}
	manifest.Write(dir, m)
	if _, err := BaseFromDir(dir); err == nil || !strings.Contains(err.Error(), "prepared by ferry prepare") {
		t.Errorf("a base prepared by ferry: %v", err)
	}
	os.WriteFile(filepath.Join(dir, manifest.IncompleteMarker), nil, 0o600)
	if _, err := BaseFromDir(dir); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("an incomplete base: %v", err)
	}
	if _, err := BaseFromDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not a backup") {
		t.Errorf("an empty directory: %v", err)
	}
	mb := t.TempDir()
	xtrabackup.WriteCheckpoints(mb, xtrabackup.Checkpoints{BackupType: xtrabackup.TypeLogApplied, ToLSN: 700, LastLSN: 750})
	if b, err := BaseFromDir(mb); err != nil || b.ToLSN != 700 || b.FromLSN != 700 || b.ID != "" {
		t.Errorf("prepared mariadb-backup base: %+v, %v", b, err)
	}
	xtrabackup.WriteCheckpoints(mb, xtrabackup.Checkpoints{BackupType: xtrabackup.TypeFull, ToLSN: 700, LastLSN: 750})
	if _, err := BaseFromDir(mb); err == nil || !strings.Contains(err.Error(), "checkpoint of its redo log") {
		t.Errorf("unprepared mariadb-backup base without a redo log: %v", err)
	}
}

// TestPlanRuns: listed pages at most deltaGap apart share one aligned read of at most
// recopyRun bytes; farther ones get reads of their own.
func TestPlanRuns(t *testing.T) {
	runs := planRuns([]uint32{3, 5, 13, 40, 41, 200}, 16384)
	type got struct{ first, length int64 }
	var out []got
	for _, r := range runs {
		out = append(out, got{r.first, r.length / 16384})
	}
	want := []got{{3, 11}, {40, 2}, {200, 1}}
	if !slices.Equal(out, want) || !runs[0].listed[13] || runs[0].listed[4] {
		t.Errorf("runs %v (listed %v), want %v", out, runs[0].listed, want)
	}
	// 64 pages of 16 KiB fill a read: page 64 starts the next one.
	if long := planRuns([]uint32{0, 8, 16, 24, 32, 40, 48, 56, 64, 72}, 16384); len(long) != 2 || long[0].length != 57*16384 || long[1].first != 64 {
		t.Errorf("runs of at most %d bytes: got %d runs, the first of %d bytes", recopyRun, len(long), long[0].length)
	}
}
