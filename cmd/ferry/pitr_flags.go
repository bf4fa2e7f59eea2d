package main

import (
	"fmt"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/pitr"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/timefmt"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pitrFlags are restore's point-in-time options.
type pitrFlags struct {
	toGTID, toTime string
	threads        int
}

func (p *pitrFlags) add(f *pflag.FlagSet) {
	f.StringVar(&p.toGTID, "to-gtid", "", "with --repo: restore the newest backup before this GTID (domain-server-seq) and apply the archived binlog up to and including it")
	f.StringVar(&p.toTime, "to-time", "", "with --repo: restore the newest backup before this time and apply the archived binlog's transactions committed at or before it: 'YYYY-MM-DD HH:MM:SS' with an offset or zone name ('+01:00', 'Europe/Berlin', 'UTC'), RFC 3339, or without one in the host's zone (TZ); any time ferry prints reads back as the same instant")
	f.IntVar(&p.threads, "replay-threads", 0, "parallel applier threads for --to-gtid/--to-time (default: twice the cores)")
}

func (p *pitrFlags) set() bool { return p.toGTID != "" || p.toTime != "" }

// target parses the flags.
func (p *pitrFlags) target() (binlog.Target, error) {
	switch {
	case p.toGTID != "" && p.toTime != "":
		return binlog.Target{}, usageErr("give one of --to-gtid and --to-time")
	case p.toGTID != "":
		g, err := binlog.ParseGTID(p.toGTID)
		if err != nil {
			return binlog.Target{}, fmt.Errorf("--to-gtid: %w", err)
		}
		return binlog.Target{GTID: &g}, nil
	}
	t, err := timefmt.Parse(p.toTime, time.Local)
	if err != nil {
		return binlog.Target{}, fmt.Errorf("--to-time: %w", err)
	}
	return binlog.Target{Time: t}, nil
}

// source plans the point-in-time restore: it picks the backup (args[0] if given),
// writes the relay logs beside the datadir and sets cfg.Replay. done removes the relay
// logs.
func (p *pitrFlags) source(cmd *cobra.Command, g *globals, sf *sourceFlags, args []string, cfg *restore.Config) (restore.Source, func(), error) {
	none := func() {}
	switch {
	case sf.repo.url == "":
		return nil, none, usageErr("--to-gtid and --to-time restore from --repo, whose binlog archive ferry binlog-archive keeps")
	case cfg.Datadir == "":
		return nil, none, usageErr("--datadir is required")
	}
	t, err := p.target()
	if err != nil {
		return nil, none, err
	}
	ctx := cmd.Context()
	r, err := sf.repo.open(ctx, g.log, false, version)
	if err != nil {
		return nil, none, err
	}
	ids, err := sf.identities()
	if err != nil {
		return nil, none, err
	}
	a, err := binlog.Open(r.Storage(), binlog.Options{Identities: ids})
	if err != nil {
		return nil, none, err
	}
	id := ""
	if len(args) > 0 {
		id = args[0]
	}
	pp, err := pitr.Prepare(ctx, r, a, id, t, cfg.Datadir)
	if err != nil {
		return nil, none, err
	}
	m, plan := pp.Backup, pp.Plan
	g.log.Info("point-in-time: planned", "target", t.String(), "backup", m.ID, "from", plan.From.String(), "until", plan.Until.String(), "transactions", plan.Groups)
	cfg.Replay = &restore.Replay{Plan: plan, Threads: p.threads}
	src, err := sf.repoSource(cmd, g, m.ID, ids)
	if err != nil {
		pp.Remove()
		return nil, none, err
	}
	return src, pp.Remove, nil
}
