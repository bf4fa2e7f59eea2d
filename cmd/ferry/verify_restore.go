package main

import (
	"fmt"
	"os"

	"github.com/ferry-backup/ferry/internal/drill"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// drillFlags are verify's restore drill (--restore) and its options.
type drillFlags struct {
	on     bool
	tmpdir string
	full   bool
	sample int
	rc     restore.Config // Mariadbd, UseMemory, Recovery, Keys
	pf     pitrFlags
	jm     jobMetrics
}

// drillOnly are the flags that mean something only with --restore and are refused
// without it. The others it shares with other verbs (--tmpdir, --mariadbd,
// --use-memory, --recovery, the key files) may come from the option files' [ferry]
// group for those, and are left unused.
var drillOnly = []string{"full", "sample", "to-gtid", "to-time", "replay-threads", "metrics-file"}

// add declares them.
func (d *drillFlags) add(f *pflag.FlagSet) {
	f.BoolVar(&d.on, "restore", false, "restore drill: restore the backup into a scratch directory, start a private server on it, check that every table the backup recorded is there, run CHECK TABLE on every table and read a sample whole (CHECKSUM TABLE); everything is removed afterwards")
	f.StringVar(&d.tmpdir, "tmpdir", "", "with --restore: where the scratch directory is made (default the system temp dir); it needs room for the whole restored datadir")
	f.BoolVar(&d.full, "full", false, "with --restore: read every table whole and run CHECK TABLE ... EXTENDED (slower: every row of every index)")
	f.IntVar(&d.sample, "sample", 5, "with --restore: user tables read whole (CHECKSUM TABLE), picked at random at each run")
	f.StringVar(&d.rc.Mariadbd, "mariadbd", "", mariadbdHelp)
	f.StringVar(&d.rc.UseMemory, "use-memory", "256M", "with --restore: memory for recovery and for the private server's buffer pool")
	addRecoveryFlag(f, &d.rc.Recovery)
	addKeyFlags(f, &d.rc.Keys)
	d.pf.add(f)
	d.jm.addFile(f)
}

// check refuses the drill's options without --restore, and flags that do not go
// with it.
func (d *drillFlags) check(f *pflag.FlagSet, args []string, binlogs bool) error {
	if !d.on {
		for _, name := range drillOnly {
			if f.Changed(name) {
				return usagef("--%s applies to --restore (the restore drill)", name)
			}
		}
		return nil
	}
	switch {
	case binlogs:
		return usageErr("--binlogs does not go with --restore: verify the archive in a run of its own")
	case len(args) == 0 && !d.pf.set():
		return usageErr("--restore needs the backup to drill: an id from ferry list, or latest (or --to-time/--to-gtid)")
	case d.sample < 0:
		return usageErr("--sample must be 0 or more")
	}
	return nil
}

// runDrill runs the restore drill and prints its findings and its one summary line.
func (d *drillFlags) run(cmd *cobra.Command, g *globals, rf repoFlags, identity string, parallel int, args []string) error {
	return d.jm.wrap("drill", g, func(cmd *cobra.Command, args []string) error {
		sf := sourceFlags{repo: rf, identity: identity, parallel: parallel, maxMemory: 256 << 20}
		rc := d.rc
		rc.Log, rc.Progress, rc.Terminal = g.log, os.Stderr, g.barOnStderr()
		limitRecoveryMemory(rc.UseMemory, sf.maxMemory)
		cfg := drill.Config{Restore: rc, TmpDir: d.tmpdir, Sample: d.sample, Full: d.full}
		cfg.Open = func(rc *restore.Config) (func(), error) {
			open := sf.open
			if d.pf.set() {
				open = func(cmd *cobra.Command, g *globals, args []string) (restore.Source, func(), error) {
					return d.pf.source(cmd, g, &sf, args, rc)
				}
			}
			src, done, err := open(cmd, g, args)
			rc.Source = src
			return done, err
		}
		rep, err := drill.Run(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		for _, f := range rep.Failures {
			fmt.Fprintf(out, "FAILED: %s\n", f)
		}
		fmt.Fprintln(out, rep.Summary())
		d.jm.set("restore_seconds", rep.Restored.Seconds())
		d.jm.set("tables_checked", float64(rep.Checked))
		d.jm.set("tables_checksummed", float64(rep.Checksummed))
		g.log.Info("restore drill completed", "backup", rep.Backup, "ok", rep.OK(), "tables", rep.Checked, "checksummed", rep.Checksummed,
			"failures", len(rep.Failures), "took", rep.Took.Round(100_000_000))
		if !rep.OK() {
			return withExitCode(fmt.Errorf("restore drill of backup %s: %d problems (listed above)", rep.Backup, len(rep.Failures)), exitIntegrity)
		}
		return nil
	})(cmd, args)
}
