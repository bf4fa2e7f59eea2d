package main

import (
	"fmt"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/repo"
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
	var binlogs bool
	cmd := &cobra.Command{
		Use:   "verify --repo REPO [ID|latest] [--binlogs] [--identity-file KEY]",
		Short: "Re-read every object of a backup: checksums, decryption, decompression, every InnoDB page",
		Example: `  ferry verify --repo s3://bucket/prod-db1 latest --identity-file /root/ferry-key.txt
  Exits non-zero naming the object (and file, page) at fault; nothing is written.
  An incremental is verified with its whole chain: every backup it applies on, down to
  its full backup, and the links between them.
  --binlogs (or no ID) re-reads the binlog archive: every segment and event checksum, every
  file whole from its first byte, each file's GTID list against the files before it; a
  break with no gap record fails, recorded gaps are listed.`,
		Args: cobra.MaximumNArgs(1),
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
			if len(args) == 0 || binlogs {
				if err := verifyArchive(cmd, g, r, cfg.Identities); err != nil || len(args) == 0 {
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
	f.BoolVar(&binlogs, "binlogs", false, "also verify the binlog archive (without an ID: only the archive)")
	return cmd
}

// chainNote names the backups verified with an incremental ("" for a full backup).
func chainNote(chain []string) string {
	if len(chain) < 2 {
		return ""
	}
	return fmt.Sprintf(" with its chain of %d (%s)", len(chain), strings.Join(chain, ", "))
}

// verifyArchive re-reads the whole binlog archive and fails on any problem.
func verifyArchive(cmd *cobra.Command, g *globals, r *repo.Repo, ids []age.Identity) error {
	a, err := binlog.Open(r.Storage(), binlog.Options{Identities: ids})
	if err != nil {
		return err
	}
	s, err := a.Verify(cmd.Context())
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if s.Files == 0 && len(s.Gaps) == 0 {
		fmt.Fprintln(out, "binlog archive: none (ferry binlog-archive keeps one)")
		return nil
	}
	for _, gap := range s.Gaps {
		fmt.Fprintf(out, "GAP: %s\n", gap)
	}
	if len(s.Problems) > 0 {
		for _, p := range s.Problems {
			fmt.Fprintf(out, "PROBLEM: %s\n", p)
		}
		return fmt.Errorf("binlog archive at %s: %d problems (listed above)", a.Location(), len(s.Problems))
	}
	last := "none"
	if s.LastGroup != nil {
		last = s.LastGroup.GTID.String()
	}
	g.log.Info("binlog archive verified", "files", s.Files, "segments", s.Segments, "transactions", s.Groups, "gaps", len(s.Gaps))
	fmt.Fprintf(out, "binlog archive OK: %d files, %d segments (%s stored), %d transactions, %s to %s, last GTID %s, %d recorded gaps\n",
		s.Files, s.Segments, human(s.StoredBytes), s.Groups, s.First, s.End, last, len(s.Gaps))
	return nil
}
