package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/spf13/cobra"
)

func newBackupCmd(g *globals) *cobra.Command {
	var cfg backup.Config
	chunk := int64(backup.DefaultChunkSize)
	cmd := &cobra.Command{
		Use:   "backup --target-dir DIR [connection options]",
		Short: "Take a hot full backup of a running MariaDB into a directory",
		Example: `  ferry backup --socket /run/mysqld/mysqld.sock --user backup --password-file /etc/ferry/pw --target-dir /backups/full-1
  The server keeps serving reads and writes; the directory has mariabackup's layout plus ferry_manifest.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Log, cfg.Progress, cfg.Terminal = g.log, os.Stderr, stderrIsTerminal()
			cfg.Version = version
			cfg.ChunkSize = int(chunk)
			cfg.Command = strings.Join(os.Args[1:], " ")
			res, err := backup.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			m := res.Manifest
			g.log.Info("backup completed OK", "dir", res.Dir, "id", m.ID, "bytes", m.TotalSize(),
				"took", m.EndTime.Sub(m.StartTime).Round(time.Millisecond), "block_commit", res.BlockCommit.Round(time.Microsecond),
				"start_lsn", m.StartLSN, "end_lsn", m.EndLSN, "gtid", m.Coordinates.GTIDBinlogPos, "page_rereads", res.PageRereads)
			fmt.Fprintln(cmd.OutOrStdout(), res.Dir)
			return nil
		},
	}
	f := cmd.Flags()
	addConnFlags(f, &cfg.Conn)
	f.StringVar(&cfg.TargetDir, "target-dir", "", "new or empty directory to write the backup to (required)")
	f.IntVar(&cfg.Parallel, "parallel", defaultParallel(), "parallel copy workers")
	f.Var(byteSize{&chunk}, "chunk-size", "bytes per data-file read and write (multiple of 64K): smaller keeps more of a busy server's write throughput, larger copies an idle one slightly faster")
	f.Var(byteSize{&cfg.MaxRate}, "max-rate", "cap on data file reads, e.g. 100M (bytes/s; default unlimited)")
	cmd.MarkFlagRequired("target-dir")
	return cmd
}
