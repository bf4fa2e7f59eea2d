package main

import (
	"fmt"
	"io"

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
