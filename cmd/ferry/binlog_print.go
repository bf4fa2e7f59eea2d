package main

import (
	"fmt"
	"io"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pitr"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/timefmt"
)

// complete is the manifests of the complete backups among entries.
func complete(entries []repo.Entry) []*manifest.Manifest {
	var ms []*manifest.Manifest
	for _, e := range entries {
		if e.Manifest != nil {
			ms = append(ms, e.Manifest)
		}
	}
	return ms
}

// printArchive describes the binlog archive, its gaps and the windows a point-in-time
// restore reaches with the backups ms.
func printArchive(w io.Writer, s *binlog.Summary, ms []*manifest.Manifest) {
	if s.Files == 0 {
		fmt.Fprintln(w, "binlog archive: none (ferry binlog-archive keeps one, for restore --to-time/--to-gtid)")
		return
	}
	last := "no complete transaction"
	if g := s.LastGroup; g != nil {
		last = fmt.Sprintf("last transaction %s at %s", g.GTID, timefmt.Format(g.Time))
	}
	fmt.Fprintf(w, "binlog archive: %d files, %s stored, %s to %s; %s\n", s.Files, human(s.StoredBytes), s.First, s.End, last)
	for _, g := range s.Gaps {
		fmt.Fprintf(w, "GAP: %s\n", g)
	}
	windows := pitr.Windows(ms, s)
	if len(windows) == 0 {
		fmt.Fprintln(w, "recoverable: nothing: no backup's binlog position lies in the archive")
	}
	for _, win := range windows {
		to := win.To.String()
		switch {
		case win.Gap != nil:
			to += " (where the gap begins)"
		case win.Last != nil:
			to = fmt.Sprintf("%s (GTID %s)", timefmt.Format(win.Last.Time), win.Last.GTID)
		}
		fmt.Fprintf(w, "recoverable: from %s (backup %s, GTID %s) to %s\n", timefmt.Format(win.From.EndTime), win.From.ID, win.From.Coordinates.GTIDBinlogPos, to)
	}
}

// listing is what ferry list --json prints: what the table and the lines below it show.
type listing struct {
	Backups     []listed     `json:"backups"`
	Archive     *archiveJSON `json:"binlog_archive"` // null: no archive
	Recoverable []windowJSON `json:"recoverable"`
}

// archiveJSON is the binlog archive as list --json prints it.
type archiveJSON struct {
	Files       int          `json:"files"`
	StoredBytes int64        `json:"stored_bytes"`
	First       string       `json:"first"` // file:pos
	End         string       `json:"end"`
	LastGTID    string       `json:"last_gtid,omitempty"`
	LastTime    time.Time    `json:"last_time,omitzero"`
	Gaps        []binlog.Gap `json:"gaps"`
}

// windowJSON is one stretch a point-in-time restore reaches.
type windowJSON struct {
	FromBackup string    `json:"from_backup"`
	FromTime   time.Time `json:"from_time"`
	FromGTID   string    `json:"from_gtid,omitempty"`
	To         string    `json:"to"` // file:pos where it ends
	ToTime     time.Time `json:"to_time,omitzero"`
	ToGTID     string    `json:"to_gtid,omitempty"`
	EndsAtGap  bool      `json:"ends_at_gap"`
}

// listingOf gathers list --json's document.
func listingOf(backups []listed, s *binlog.Summary, ms []*manifest.Manifest) listing {
	l := listing{Backups: backups, Recoverable: []windowJSON{}}
	if s == nil || s.Files == 0 {
		return l
	}
	a := &archiveJSON{Files: s.Files, StoredBytes: s.StoredBytes, First: s.First.String(), End: s.End.String(), Gaps: append([]binlog.Gap{}, s.Gaps...)}
	if g := s.LastGroup; g != nil {
		a.LastGTID, a.LastTime = g.GTID.String(), g.Time.Local()
	}
	l.Archive = a
	for _, w := range pitr.Windows(ms, s) {
		j := windowJSON{FromBackup: w.From.ID, FromTime: w.From.EndTime.Local(), FromGTID: w.From.Coordinates.GTIDBinlogPos, To: w.To.String(), EndsAtGap: w.Gap != nil}
		if w.Gap == nil && w.Last != nil {
			j.ToTime, j.ToGTID = w.Last.Time.Local(), w.Last.GTID.String()
		}
		l.Recoverable = append(l.Recoverable, j)
	}
	return l
}
