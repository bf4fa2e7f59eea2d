package main

import (
	"fmt"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
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
		Use:   "expire --repo REPO (--keep-last N | --keep-days D | --keep-daily N | --keep-weekly N | --keep-monthly N | --keep-yearly N)... [--dry-run]",
		Short: "Delete the backups a retention policy lets go, and the debris of interrupted backups",
		Example: `  ferry expire --repo s3://bucket/prod-db1 --keep-last 7 --keep-days 30
  ferry expire --repo s3://bucket/prod-db1 --keep-daily 7 --keep-weekly 5 --keep-monthly 12 --dry-run
  Keeps a backup if any rule keeps it, always the newest complete one, and any
  backup still running; deletes a backup's manifest first, then its objects.
  --keep-daily N keeps, for each of the last N days that have a complete backup, the
  newest backup that ended that day (local time, TZ); --keep-weekly (ISO weeks),
  --keep-monthly and --keep-yearly likewise, as restic's options do. Each kept backup
  is printed with the rules that keep it ("keep ... (newest, last 1, daily 2026-11-28)").
  A kept incremental keeps the backups it applies on, down to its full backup
  ("keep ... (base of kept incremental ID)"); they do not count in --keep-last.
  A backup stored with an S3 Object Lock (backup --lock-days) is kept until its date
  whatever the rules say ("keep ... (locked until DATE (governance): it can go then)");
  in a bucket with Object Lock enabled, a deleted backup's object versions are deleted
  for good (space freed), never by bypassing a lock.
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
				why := plan.Why(e.ID)
				if why != "" {
					why = " (" + why + ")"
				}
				fmt.Fprintf(out, "keep    %s%s\n", e.Describe(), why)
			}
			verb := "delete "
			if dryRun {
				verb = "would delete "
			}
			err = r.Expire(cmd.Context(), plan, repo.ExpireOptions{DryRun: dryRun, Log: g.log,
				Deleting: func(e repo.Entry) { fmt.Fprintf(out, "%s%s\n", verb, e.Describe()) }})
			if err != nil {
				return err
			}
			return expireBinlogs(cmd, g, r, plan, dryRun)
		},
	}
	f := cmd.Flags()
	rf.add(f)
	f.IntVar(&p.KeepLast, "keep-last", 0, "keep the newest N complete backups")
	f.IntVar(&days, "keep-days", 0, "keep complete backups that ended in the last D days")
	f.IntVar(&p.KeepDaily, "keep-daily", 0, "keep the newest backup of each of the last N days that have one")
	f.IntVar(&p.KeepWeekly, "keep-weekly", 0, "keep the newest backup of each of the last N ISO weeks that have one")
	f.IntVar(&p.KeepMonthly, "keep-monthly", 0, "keep the newest backup of each of the last N months that have one")
	f.IntVar(&p.KeepYearly, "keep-yearly", 0, "keep the newest backup of each of the last N years that have one")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	return cmd
}

// expireBinlogs deletes the archived binlog files no kept backup needs and prints the
// window that remains.
func expireBinlogs(cmd *cobra.Command, g *globals, r *repo.Repo, plan *repo.ExpirePlan, dryRun bool) error {
	a, err := binlog.Open(r.Storage(), binlog.Options{})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	verb := "delete"
	if dryRun {
		verb = "would delete"
	}
	kept := plan.KeptManifests()
	s, err := pitr.ExpireBinlogs(cmd.Context(), a, kept, pitr.ExpireOptions{DryRun: dryRun, Log: g.log,
		Pruning: func(pr *pitr.Prune) {
			fmt.Fprintf(out, "%s binlogs %s to %s (%d files, %s stored): before %s, the position of the oldest kept backup %s\n",
				verb, pr.Files[0].File, pr.Files[len(pr.Files)-1].File, len(pr.Files), human(pr.Bytes), pr.KeepFrom, pr.Keeper)
		}})
	if err != nil || s == nil {
		return err
	}
	printArchive(out, s, kept)
	return nil
}
