package main

import (
	"fmt"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pitr"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/spf13/cobra"
)

func newExpireCmd(g *globals) *cobra.Command {
	var rf repoFlags
	var p repo.Policy
	var days int
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "expire --repo REPO (--keep-last N | --keep-days D) [--dry-run]",
		Short: "Delete the backups a retention policy lets go, and the debris of interrupted backups",
		Example: `  ferry expire --repo s3://bucket/prod-db1 --keep-last 7 --keep-days 30
  Keeps a backup if either rule keeps it, always the newest complete one, and any
  backup still running; deletes a backup's manifest first, then its objects.
  A kept incremental keeps the backups it applies on, down to its full backup
  ("keep ... (base of kept incremental ID)"); they do not count in --keep-last.
  The binlog archive keeps the files from the oldest kept backup's binlog position on (what
  the kept backups need to reach the present) and loses the older ones; the recoverable
  window that remains is printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.KeepWithin = time.Duration(days) * 24 * time.Hour
			if err := p.Check(); err != nil {
				return err
			}
			r, err := rf.open(cmd.Context(), g.log, false, version)
			if err != nil {
				return err
			}
			plan, err := r.PlanExpire(cmd.Context(), p, time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, e := range plan.Keep {
				fmt.Fprintf(out, "keep    %s%s\n", e.Describe(), keptFor(plan, e.ID))
			}
			for _, e := range append(plan.Expired, plan.Debris...) {
				verb := "delete "
				if dryRun {
					verb = "would delete "
				}
				fmt.Fprintf(out, "%s%s\n", verb, e.Describe())
				if dryRun {
					continue
				}
				if err := r.Delete(cmd.Context(), e.ID); err != nil {
					return err
				}
				g.log.Info("deleted", "backup", e.ID, "status", e.Status, "objects", e.Objects)
			}
			return expireBinlogs(cmd, g, r, plan, dryRun)
		},
	}
	f := cmd.Flags()
	rf.add(f)
	f.IntVar(&p.KeepLast, "keep-last", 0, "keep the newest N complete backups")
	f.IntVar(&days, "keep-days", 0, "keep complete backups that ended in the last D days")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	return cmd
}

// keptFor says why the policy's plan keeps backup id beyond its rules ("" if it does
// not): a kept incremental, or a backup still running, applies on it.
func keptFor(plan *repo.ExpirePlan, id string) string {
	child, ok := plan.BaseOf[id]
	if !ok {
		return ""
	}
	for _, e := range plan.Keep {
		if e.ID == child && e.Status == repo.StatusRunning {
			return fmt.Sprintf(" (base of running backup %s)", child)
		}
	}
	return fmt.Sprintf(" (base of kept incremental %s)", child)
}

// expireBinlogs deletes the archived binlog files no kept backup needs and prints the
// window that remains.
func expireBinlogs(cmd *cobra.Command, g *globals, r *repo.Repo, plan *repo.ExpirePlan, dryRun bool) error {
	ctx := cmd.Context()
	a, err := binlog.Open(r.Storage(), binlog.Options{})
	if err != nil {
		return err
	}
	var kept []*manifest.Manifest
	for _, e := range plan.Keep {
		if e.Manifest != nil {
			kept = append(kept, e.Manifest)
		}
	}
	pr, err := pitr.PlanPrune(ctx, a, kept)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	verb := "delete"
	if dryRun {
		verb = "would delete"
	}
	if len(pr.Files) > 0 {
		fmt.Fprintf(out, "%s binlogs %s to %s (%d files, %s stored): before %s, the position of the oldest kept backup %s\n",
			verb, pr.Files[0].File, pr.Files[len(pr.Files)-1].File, len(pr.Files), human(pr.Bytes), pr.KeepFrom, pr.Keeper)
	}
	if !dryRun {
		if err := pr.Apply(ctx, a); err != nil {
			return err
		}
		g.log.Info("expired binlogs", "files", len(pr.Files), "stored_bytes", pr.Bytes)
	}
	s, err := a.Summarize(ctx)
	if err != nil || s.Files == 0 {
		return err
	}
	if dryRun {
		s = pr.After(s)
	}
	printArchive(out, s, kept)
	return nil
}
