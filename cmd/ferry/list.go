package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/timefmt"
	"github.com/spf13/cobra"
)

// listed is one backup as ferry list --json prints it.
type listed struct {
	ID          string    `json:"id"`
	Type        string    `json:"type,omitempty"`
	Base        string    `json:"base_id,omitempty"` // an incremental's base backup
	Method      string    `json:"method,omitempty"`  // how an incremental found its changed pages
	Status      string    `json:"status"`
	Restorable  bool      `json:"restorable"`
	Start       time.Time `json:"start,omitzero"`
	End         time.Time `json:"end,omitzero"`
	Size        int64     `json:"size,omitempty"` // bytes of the server's files
	StoredSize  int64     `json:"stored_size"`    // bytes in the repository
	Objects     int       `json:"objects"`
	GTID        string    `json:"gtid,omitempty"`
	Server      string    `json:"server_version,omitempty"`
	Compression string    `json:"compression,omitempty"`
	Encryption  string    `json:"encryption,omitempty"`
	LockMode    string    `json:"lock_mode,omitempty"`   // S3 Object Lock: GOVERNANCE or COMPLIANCE
	LockedUntil time.Time `json:"locked_until,omitzero"` // its retain-until date
	lock        string    // the LOCK column: "governance until ...", "-"
}

func newListCmd(g *globals) *cobra.Command {
	var rf repoFlags
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "list --repo REPO [--json] [--all]",
		Short: "List the restorable backups of a repository: id, type, base, start/end, size stored, GTID, status",
		Example: `  ferry list --repo s3://bucket/prod-db1
  ferry list --repo /mnt/backups --json
  An incremental shows its base (the backup it applies on) and how its changed pages were
  found (redo or scan); restoring it needs its whole chain down to a full backup.
  A backup is listed once its manifest is written. --all also shows unfinished ones: running,
  or incomplete (interrupted: never restorable; ferry expire removes them).
  Below the table: the binlog archive (ferry binlog-archive), its gaps, and the windows a
  restore --to-time/--to-gtid reaches (--json: "backups", "binlog_archive", "recoverable").
  A backup stored with an S3 Object Lock (backup --lock-days) shows it in a LOCK column
  ("governance until ..."; --json: "lock_mode", "locked_until"), read from its manifest.
  Times are in the host's zone (TZ) with their offset (--json: RFC 3339); any of them
  pasted into restore --to-time means the same instant.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := rf.open(cmd.Context(), g.log, false, version)
			if err != nil {
				return err
			}
			entries, err := r.List(cmd.Context())
			if err != nil {
				return err
			}
			out := []listed{}
			hidden := map[string]int{}
			for _, e := range entries {
				if e.Manifest == nil && !all {
					hidden[e.Status]++
					continue
				}
				out = append(out, toListed(e))
			}
			if n := hidden[repo.StatusRunning] + hidden[repo.StatusIncomplete]; n > 0 {
				g.log.Info("unfinished backups not listed (--all shows them; ferry expire removes the incomplete ones)",
					"running", hidden[repo.StatusRunning], "incomplete", hidden[repo.StatusIncomplete])
			}
			a, err := binlog.Open(r.Storage(), binlog.Options{})
			if err != nil {
				return err
			}
			sum, err := a.Summarize(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(listingOf(out, sum, complete(entries)))
			}
			printList(cmd.OutOrStdout(), out)
			printArchive(cmd.OutOrStdout(), sum, complete(entries))
			return nil
		},
	}
	rf.add(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().BoolVar(&all, "all", false, "also list unfinished backups (running, or interrupted debris)")
	return cmd
}

func toListed(e repo.Entry) listed {
	l := listed{ID: e.ID, Status: e.Status, StoredSize: e.StoredSize, Objects: e.Objects}
	if m := e.Manifest; m != nil {
		l.Restorable, l.Type, l.Start, l.End, l.Size = true, m.Type, m.StartTime.Local(), m.EndTime.Local(), m.TotalSize()
		l.GTID, l.Server = m.Coordinates.GTIDBinlogPos, m.Server.Version
		l.Compression, l.Encryption = m.Storage.Compression, m.Storage.Encryption
		if m.Incremental != nil {
			l.Base, l.Method = m.Incremental.BaseID, m.Incremental.Method
		}
	} else if e.Marker != nil {
		l.Start = e.Marker.Started.Local()
	}
	if lk := e.Lock(); lk != nil {
		l.LockMode, l.LockedUntil = lk.Mode, lk.RetainUntil.Local()
		l.lock = repo.DescribeLock(lk, time.Now())
	}
	return l
}

// printList prints the table; the LOCK column only when a backup has an Object Lock.
func printList(w io.Writer, list []listed) {
	locks := slices.ContainsFunc(list, func(l listed) bool { return l.lock != "" })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "ID\tTYPE\tBASE\tMETHOD\tSTART\tEND\tSIZE\tSTORED\tGTID\tSTATUS"
	if locks {
		head += "\tLOCK"
	}
	fmt.Fprintln(tw, head)
	for _, l := range list {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", l.ID, dash(l.Type), dash(l.Base), dash(l.Method), timefmt.Format(l.Start), timefmt.Format(l.End),
			human(l.Size), human(l.StoredSize), dash(l.GTID), l.Status)
		if locks {
			row += "\t" + dash(l.lock)
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	if len(list) == 0 {
		fmt.Fprintln(w, "(no backups)")
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// human prints a byte count with a binary unit.
func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
