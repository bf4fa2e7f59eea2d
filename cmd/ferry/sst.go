package main

import (
	"errors"
	"log/slog"
	"os"

	"github.com/ferry-backup/ferry/internal/sst"
	"github.com/spf13/cobra"
)

// reported is an error the verb has already logged in its own form: main exits
// non-zero without printing it again.
type reported struct{ error }

func newSSTCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sst --role joiner|donor ... (run by mariadbd as wsrep_sst_ferry)",
		Short: "The Galera SST method: mariadbd runs it (install it with ferry install-sst, set wsrep_sst_method=ferry)",
		Long: `mariadbd runs the SST method with its own arguments (--role, --address, --datadir,
--defaults-file, --parent, --gtid, --bypass, --socket, ..., --mysqld-args ...); the
settings come from the [sst] group of the server's option files. The joiner listens and
prints "ready ADDRESS"; the donor sends a hot copy (BACKUP STAGE: the donor stays
writable) over TLS; the joiner prepares it in its datadir, swaps it in (the old
datadir is kept aside) and prints "uuid:seqno domain". Logs go to stderr, the server's
error log, as "WSREP_SST: [LEVEL] ferry joiner|donor: ...". See docs/galera.md.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			a, err := sst.ParseArgs(args)
			role := a.Role
			if role == "" {
				role = "method"
			}
			log := sst.NewLogger(os.Stderr, role, slog.LevelInfo)
			if err == nil {
				err = runSST(cmd, a, log)
			}
			if err != nil {
				log.Error(oneLine(err.Error()))
				return reported{err}
			}
			return nil
		},
	}
}

func runSST(cmd *cobra.Command, a sst.Args, log *slog.Logger) error {
	c, err := sst.LoadConfig(cmd.Context(), a, os.Getenv, os.Stdin)
	if err != nil {
		return c.Explain(err)
	}
	env := sst.Env{Out: os.Stdout, Log: log, Version: version}
	if a.Role == sst.RoleJoiner {
		return c.Explain(sst.Join(cmd.Context(), a, c, env))
	}
	return c.Explain(sst.Donate(cmd.Context(), a, c, env))
}

// isReported tells main not to print an error again.
func isReported(err error) bool {
	var r reported
	return errors.As(err, &r)
}
