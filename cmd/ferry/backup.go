package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// backupFlags are the flags that need checking before they become a backup.Config.
type backupFlags struct {
	chunk       int64
	stream      bool
	compress    string
	encryptTo   []string
	encryptFile []string
}

func newBackupCmd(g *globals) *cobra.Command {
	var cfg backup.Config
	var fl backupFlags
	cfg.MaxMemory = backup.DefaultMaxMemory
	cmd := &cobra.Command{
		Use:   "backup (--target-dir DIR | --stream) [connection options]",
		Short: "Take a hot full backup of a running MariaDB into a directory or an xbstream on stdout",
		Example: `  ferry backup --socket /run/mysqld/mysqld.sock --user backup --password-file /etc/ferry/pw --target-dir /backups/full-1
  ferry backup --stream --compress zstd --encrypt-to age1... | ssh host2 'ferry restore --from - --identity-file key.txt --datadir /var/lib/mysql-new'
  ferry backup --stream --compress none > full.xbstream     # mbstream -x -C dir < full.xbstream unpacks it
  The server keeps serving reads and writes; a directory has mariabackup's layout plus ferry_manifest.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := fl.apply(cmd, &cfg); err != nil {
				return err
			}
			cfg.Log, cfg.Progress, cfg.Terminal = g.log, os.Stderr, stderrIsTerminal()
			cfg.Version = version
			cfg.Command = strings.Join(os.Args[1:], " ")
			res, err := backup.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			m := res.Manifest
			g.log.Info("backup completed OK", "to", either(cfg.Stream != nil, "stream", res.Dir), "id", m.ID, "bytes", m.TotalSize(),
				"took", m.EndTime.Sub(m.StartTime).Round(time.Millisecond), "block_commit", res.BlockCommit.Round(time.Microsecond),
				"start_lsn", m.StartLSN, "end_lsn", m.EndLSN, "gtid", m.Coordinates.GTIDBinlogPos, "page_rereads", res.PageRereads)
			if cfg.Stream == nil {
				fmt.Fprintln(cmd.OutOrStdout(), res.Dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	addConnFlags(f, &cfg.Conn)
	f.StringVar(&cfg.TargetDir, "target-dir", "", "new or empty directory to write the backup to")
	f.BoolVar(&fl.stream, "stream", false, "write an xbstream to stdout instead of a directory (mbstream -x can unpack it)")
	f.StringVar(&fl.compress, "compress", "", "zstd, lz4 or none (default zstd with --stream, none for a directory)")
	f.IntVar(&cfg.Level, "compress-level", 0, "compression level (zstd 1-22, lz4 1-9; default the fastest)")
	f.StringArrayVar(&fl.encryptTo, "encrypt-to", nil, "encrypt the stream to this age public key (age1...; repeatable)")
	f.StringArrayVar(&fl.encryptFile, "encrypt-to-file", nil, "encrypt to the age public keys in this file (one per line), or to the public key of an identity file such as ferry keygen writes (repeatable)")
	f.Var(byteSize{&cfg.MaxMemory}, "max-memory", "memory for the stream pipeline's buffers")
	f.IntVar(&cfg.Parallel, "parallel", defaultParallel(), "parallel copy workers")
	f.Var(byteSize{&fl.chunk}, "chunk-size", "bytes per data-file read and write (multiple of 64K; default 256K for a directory, 1M for a stream): smaller keeps more of a busy server's write throughput, larger copies an idle one faster")
	f.Var(byteSize{&cfg.MaxRate}, "max-rate", "cap on data file reads, e.g. 100M (bytes/s; default unlimited)")
	return cmd
}

// apply checks the flag combination and fills cfg.
func (fl backupFlags) apply(cmd *cobra.Command, cfg *backup.Config) error {
	cfg.ChunkSize = int(fl.chunk)
	switch {
	case fl.stream && cfg.TargetDir != "":
		return errors.New("give either --target-dir or --stream, not both")
	case !fl.stream && cfg.TargetDir == "":
		return errors.New("--target-dir DIR or --stream is required")
	case !fl.stream && (fl.compress != "" && fl.compress != "none" || len(fl.encryptTo)+len(fl.encryptFile) > 0):
		return errors.New("--compress and --encrypt-to apply to --stream; a directory backup is stored as mariadb-backup stores it")
	}
	comp := fl.compress
	if comp == "" && fl.stream {
		comp = string(codec.Zstd)
	}
	c, err := codec.ParseCompression(comp)
	if err != nil {
		return fmt.Errorf("--compress: %w", err)
	}
	cfg.Compression = c
	if cfg.Recipients, err = codec.Recipients(fl.encryptTo, fl.encryptFile); err != nil {
		return err
	}
	if fl.stream {
		if term.IsTerminal(int(os.Stdout.Fd())) {
			return errors.New("--stream writes the backup to stdout, which is a terminal: redirect it to a file or pipe it to a command")
		}
		cfg.Stream = cmd.OutOrStdout()
	}
	return nil
}

func either(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}
