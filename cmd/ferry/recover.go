package main

import (
	"fmt"

	"github.com/ferry-backup/ferry/internal/galera"
	"github.com/spf13/cobra"
)

func newRecoverCmd(g *globals) *cobra.Command {
	var cfg galera.RecoverConfig
	cmd := &cobra.Command{
		Use:   "recover --datadir DATADIR [--defaults-file my.cnf]",
		Short: "Print the Galera position of a stopped (crashed) node, as mariadbd --wsrep-recover finds it",
		Example: `  ferry recover --datadir /var/lib/mysql --defaults-file /etc/mysql/my.cnf
  A node killed hard has seqno -1 in grastate.dat and, started plainly, asks for a full
  SST. Start it with the printed --wsrep-start-position and it rejoins by IST while a
  donor's gcache holds the write-sets since. Runs InnoDB crash recovery on the datadir
  with the stock mariadbd (as galera_recovery does); the node must be stopped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := galera.Recover(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			g.log.Info("recovered the node's position", "datadir", cfg.Datadir, "position", r.Position.String())
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n--wsrep-start-position=%s\n", r.Position, r.StartPosition)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Datadir, "datadir", "", "the node's datadir (required; the node must be stopped)")
	f.StringVar(&cfg.DefaultsFile, "defaults-file", "", "the node's my.cnf (default: the host's usual option files)")
	f.StringVar(&cfg.Mariadbd, "mariadbd", "", "mariadbd binary (default: found on PATH or /usr/sbin)")
	cmd.MarkFlagRequired("datadir")
	return cmd
}
