package main

import (
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/spf13/cobra"
)

func newPrepareCmd(g *globals) *cobra.Command {
	var cfg restore.PrepareConfig
	cmd := &cobra.Command{
		Use:   "prepare --target-dir DIR",
		Short: "Run crash recovery on a backup with the stock mariadbd, making it a clean datadir",
		Example: `  ferry prepare --target-dir /backups/full-1
  Works on ferry and mariadb-backup backups; running it twice is harmless.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Log = g.log
			if err := restore.Prepare(cmd.Context(), cfg); err != nil {
				return err
			}
			g.log.Info("prepare completed OK", "dir", cfg.Dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "target-dir", "", "backup directory to prepare (required)")
	f.StringVar(&cfg.Mariadbd, "mariadbd", "", "mariadbd binary of the backup's version (default: found on PATH or /usr/sbin)")
	f.StringVar(&cfg.UseMemory, "use-memory", "256M", "InnoDB buffer pool for recovery")
	cmd.MarkFlagRequired("target-dir")
	return cmd
}
