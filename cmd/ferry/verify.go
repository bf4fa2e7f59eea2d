package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/verify"
	"github.com/spf13/cobra"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var rf repoFlags
	var cfg verify.Config
	var identity string
	cmd := &cobra.Command{
		Use:   "verify --repo REPO ID|latest [--identity-file KEY]",
		Short: "Re-read every object of a backup: checksums, decryption, decompression, every InnoDB page",
		Example: `  ferry verify --repo s3://bucket/prod-db1 latest --identity-file /root/ferry-key.txt
  Exits non-zero naming the object (and file, page) at fault; nothing is written.
  An incremental is verified with its whole chain: every backup it applies on, down to
  its full backup, and the links between them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := rf.open(cmd.Context(), g.log, false, version)
			if err != nil {
				return err
			}
			if identity != "" {
				if cfg.Identities, err = codec.Identities(identity); err != nil {
					return err
				}
			}
			cfg.Repo, cfg.BackupID, cfg.Log, cfg.Progress, cfg.Terminal = r, args[0], g.log, os.Stderr, stderrIsTerminal()
			rep, err := verify.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			g.log.Info("verify completed OK", "backup", rep.ID, "chain", rep.Chain, "files", rep.Files, "objects", rep.Objects,
				"stored_bytes", rep.StoredBytes, "bytes", rep.RawBytes, "innodb_pages", rep.Pages)
			fmt.Fprintf(cmd.OutOrStdout(), "backup %s OK%s: %d files, %d objects (%s stored), %d InnoDB pages valid\n",
				rep.ID, chainNote(rep.Chain), rep.Files, rep.Objects, human(rep.StoredBytes), rep.Pages)
			return nil
		},
	}
	f := cmd.Flags()
	rf.add(f)
	f.StringVar(&identity, "identity-file", "", "age identity (secret key) file, for an encrypted backup")
	f.IntVar(&cfg.Parallel, "parallel", 8, "objects read at once")
	return cmd
}

// chainNote names the backups verified with an incremental ("" for a full backup).
func chainNote(chain []string) string {
	if len(chain) < 2 {
		return ""
	}
	return fmt.Sprintf(" with its chain of %d (%s)", len(chain), strings.Join(chain, ", "))
}
