package main

import (
	"fmt"
	"github.com/ferry-backup/ferry/internal/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"hash/crc32"

	"github.com/ferry-backup/ferry/internal/archiver"
	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/spf13/cobra"
)

func newBinlogArchiveCmd(g *globals) *cobra.Command {
	var rf repoFlags
	var conn mariadb.ConnConfig
	var cfg archiver.Config
	var compress string
	var level int
	var encryptTo, encryptFile []string
	var serverID uint32
	var metricsAddr string
	cmd := &cobra.Command{
		Use:   "binlog-archive --repo REPO [connection options]",
		Short: "Follow the server's binary log as a replica does and store it in the repository as it is written, for point-in-time restore",
		Example: `  ferry binlog-archive --repo s3://bucket/db1 --socket /run/mysqld/mysqld.sock --user repl
  Runs until stopped (SIGTERM stores what it received first); docs/binlog-archive.md has a
  systemd unit. It resumes where the archive ends, after its own restart or the server's. The
  user needs GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.*; without one it exits non-zero
  naming it. A lost connection is retried for ever, each retry logged (docs/binlog-archive.md).
  ferry restore --repo REPO --to-time '2026-11-24 13:04:59 +01:00' --datadir /var/lib/mysql-new`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := conn.Resolve()
			if err != nil {
				return err
			}
			comp, err := codec.ParseCompression(orDefault(compress, "zstd"))
			if err != nil {
				return fmt.Errorf("--compress: %w", err)
			}
			recipients, err := codec.Recipients(encryptTo, encryptFile)
			if err != nil {
				return err
			}
			r, err := rf.open(ctx, g.log, true, version)
			if err != nil {
				return err
			}
			if err := r.Create(ctx); err != nil {
				return err
			}
			a, err := binlog.Open(r.Storage(), binlog.Options{Compression: comp, Level: level, Recipients: recipients})
			if err != nil {
				return err
			}
			cfg.Conn, cfg.Log = c, g.log
			cfg.ServerID = serverID
			if cfg.ServerID == 0 {
				cfg.ServerID = defaultArchiverID(r.Location())
			}
			cfg.Stats = &archiver.Stats{}
			if err := listenMetrics(ctx, g, metricsAddr, func(r *prometheus.Registry) { metrics.RegisterArchiver(r, cfg.Stats) }); err != nil {
				return err
			}
			return archiver.Run(ctx, a, cfg)
		},
	}
	f := cmd.Flags()
	rf.add(f)
	addConnFlags(f, &conn)
	f.Uint32Var(&serverID, "server-id", 0, "server_id to register with, as a replica does; unique in the topology (default: one derived from --repo, in 2000000000-2147483647)")
	f.DurationVar(&cfg.FlushInterval, "flush-interval", archiver.DefaultFlushInterval, "store what was received at least this often (the archive's delay behind the server)")
	cfg.SegmentSize, cfg.MergeSize = archiver.DefaultSegmentSize, archiver.DefaultMergeSize
	f.Var(intSize{&cfg.SegmentSize}, "segment-size", "store a segment at once when this many bytes are waiting (e.g. 16M)")
	f.Var(intSize{&cfg.MergeSize}, "merge-size", "merge the small segments of a steady load into one segment of this size, e.g. 32M (held in memory: twice, while one merge is stored)")
	f.DurationVar(&cfg.MergeEvery, "merge-every", archiver.DefaultMergeEvery, "merge the small segments at least this often, and when their file ends")
	f.DurationVar(&cfg.Heartbeat, "heartbeat", archiver.DefaultHeartbeat, "ask the server for a heartbeat this often on an idle binlog (a connection silent 4 times as long is made again)")
	addMetricsListen(f, &metricsAddr)
	f.DurationVar(&cfg.RetryMax, "retry-max", archiver.DefaultRetryMax, "longest wait between reconnection attempts (a lost connection is retried for ever; a missing grant is not)")
	f.DurationVar(&cfg.StatusEvery, "status-every", archiver.DefaultStatusEvery, "log how far the archive goes (where it ends, its last GTID, the age of the newest event stored) this often")
	f.StringVar(&compress, "compress", "", "zstd, lz4 or none (default zstd)")
	f.IntVar(&level, "compress-level", 0, "compression level (default the fastest)")
	f.StringArrayVar(&encryptTo, "encrypt-to", nil, "encrypt the archived binlogs to this age public key (repeatable)")
	f.StringArrayVar(&encryptFile, "encrypt-to-file", nil, "encrypt to the age public keys in this file (repeatable)")
	return cmd
}

// defaultArchiverID derives a stable replica server_id from the repository, so that a
// restarted archiver replaces its own stale connection on the server.
func defaultArchiverID(location string) uint32 {
	return 2000000000 + crc32.ChecksumIEEE([]byte(location))%147483647
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
