package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/verify"
	"github.com/spf13/cobra"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var rf repoFlags
	var cfg verify.Config
	var identity string
	var binlogs bool
	var df drillFlags
	cmd := &cobra.Command{
		Use:   "verify --repo REPO [ID|latest] [--binlogs] [--identity-file KEY] [--restore [--full] [--tmpdir DIR]]",
		Short: "Re-read every object of a backup (or of all of them): checksums, decryption, decompression, every InnoDB page",
		Example: `  ferry verify --repo s3://bucket/prod-db1 --identity-file /root/ferry-key.txt
  ferry verify --repo s3://bucket/prod-db1 latest --identity-file /root/ferry-key.txt
  Without an ID: every backup of the repository and the binlog archive, each stored object
  read once; one summary line says what was checked, and it exits non-zero naming each
  backup that failed (an incremental fails with any backup of its chain).
  With an ID: that backup; exits non-zero naming the object (and file, page) at fault.
  A backup stored with an S3 Object Lock (backup --lock-days) is reported with it, and
  fails if the retention the server holds on its manifest is missing, shorter than its
  manifest records, or no longer compliance (someone weakened it).
  Nothing is written. An incremental is verified with its whole chain: every backup it
  applies on, down to its full backup, and the links between them.
  --binlogs re-reads the binlog archive too (without an ID: only the archive): every
  segment and event checksum, every file whole from its first byte, each file's GTID
  list against the files before it; a break with no gap record fails, recorded gaps are
  listed.
  --restore is a restore drill: the backup is restored into a scratch directory under
  --tmpdir (room for the whole datadir), a private server started on it (a socket
  there, no networking), every table the backup recorded must be there, CHECK TABLE
  must pass on every table and a sample (--sample, or all with --full) must read whole;
  everything is removed afterwards and one summary line printed (docs/operations.md).
  ferry verify --repo s3://bucket/prod-db1 latest --restore --tmpdir /var/tmp`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := df.check(cmd.Flags(), args, binlogs); err != nil {
				return err
			}
			if df.on {
				return df.run(cmd, g, rf, identity, cfg.Parallel, args)
			}
			r, err := rf.open(cmd.Context(), g.log, false, version)
			if err != nil {
				return err
			}
			if identity != "" {
				if cfg.Identities, err = codec.Identities(identity); err != nil {
					return err
				}
			}
			cfg.Repo, cfg.Log, cfg.Progress, cfg.Terminal = r, g.log, os.Stderr, g.barOnStderr()
			switch {
			case len(args) == 0 && binlogs:
				_, err := verifyArchive(cmd, g, r, cfg.Identities)
				return err
			case len(args) == 0:
				return verifyAll(cmd, g, cfg)
			case binlogs:
				if _, err := verifyArchive(cmd, g, r, cfg.Identities); err != nil {
					return err
				}
			}
			cfg.BackupID = args[0]
			rep, err := verify.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			g.log.Info("verify completed OK", "backup", rep.ID, "chain", rep.Chain, "files", rep.Files, "objects", rep.Objects,
				"stored_bytes", rep.StoredBytes, "bytes", rep.RawBytes, "innodb_pages", rep.Pages)
			fmt.Fprintf(cmd.OutOrStdout(), "backup %s OK%s: %d files, %d objects (%s stored), %d InnoDB pages valid%s\n",
				rep.ID, chainNote(rep.Chain), rep.Files, rep.Objects, human(rep.StoredBytes), rep.Pages, lockNote(rep.Lock, rep.LockNotHere))
			return nil
		},
	}
	f := cmd.Flags()
	rf.add(f)
	rf.addTrust(f)
	f.StringVar(&identity, "identity-file", "", "age identity (secret key) file, for an encrypted backup")
	f.IntVar(&cfg.Parallel, "parallel", defaults.Downloads, "objects read at once")
	f.BoolVar(&binlogs, "binlogs", false, "also verify the binlog archive (without an ID: only the archive, no backup)")
	df.add(f)
	return cmd
}

// chainNote names the backups verified with an incremental ("" for a full backup).
func chainNote(chain []string) string {
	if len(chain) < 2 {
		return ""
	}
	return fmt.Sprintf(" with its chain of %d (%s)", len(chain), strings.Join(chain, ", "))
}

// verifyAll verifies every backup and the binlog archive, prints a line per backup
// and one summary line, and fails naming each backup that failed.
func verifyAll(cmd *cobra.Command, g *globals, cfg verify.Config) error {
	out := cmd.OutOrStdout()
	sum, err := verify.All(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	for _, res := range sum.Unreadable {
		fmt.Fprintf(out, "FAILED: %v\n", res.Err)
	}
	for _, res := range sum.Results {
		printResult(out, res)
	}
	as, aerr := verifyArchive(cmd, g, cfg.Repo, cfg.Identities)
	if aerr != nil && cmd.Context().Err() != nil {
		return aerr
	}
	if aerr != nil {
		fmt.Fprintf(out, "binlog archive FAILED: %v\n", aerr)
	}
	failed := sum.Failed()
	fmt.Fprintln(out, summaryLine(sum, as, aerr))
	n := len(sum.Results) + len(sum.Unreadable)
	g.log.Info("verify of the repository completed", "backups", n, "failed", len(failed), "archive_ok", aerr == nil)
	switch {
	case len(failed) > 0:
		code := exitIntegrity // every backup bad
		if len(failed) < n || aerr == nil && as != nil {
			code = exitPartial // some good, some bad
		}
		return withExitCode(fmt.Errorf("%d of %d backups failed verification: %s (listed above)", len(failed), n, strings.Join(ids(failed), ", ")), code)
	case aerr != nil && n > 0:
		return withExitCode(aerr, exitPartial) // the backups verified, the archive did not
	case aerr != nil:
		return aerr
	case n == 0 && as == nil:
		return fmt.Errorf("nothing to verify: %s holds no complete backup and no binlog archive", cfg.Repo.Location())
	}
	return nil
}

// printResult prints one backup's line of a verification of the repository.
func printResult(w io.Writer, res verify.Result) {
	if res.Err != nil {
		msg := flagText(res.Err)
		if !strings.Contains(msg, res.ID) {
			msg = "backup " + res.ID + ": " + msg
		}
		fmt.Fprintf(w, "FAILED: %s\n", msg)
		return
	}
	r := res.Report
	fmt.Fprintf(w, "backup %s OK%s: %d files, %d objects (%s stored), %d InnoDB pages valid%s\n",
		res.ID, chainNote(r.Chain), r.Files, r.Objects, human(r.StoredBytes), r.Pages, lockNote(r.Lock, r.LockNotHere))
}

// lockNote says what S3 Object Lock a verified backup holds ("" for none).
func lockNote(l *manifest.Lock, notHere bool) string {
	switch {
	case l == nil:
		return ""
	case notHere:
		return "; Object Lock " + repo.DescribeLock(l, time.Now()) + " where it was taken, not in this repository (no Object Lock here)"
	}
	return "; Object Lock " + repo.DescribeLock(l, time.Now())
}

// summaryLine says in one line what a verification of the repository checked and
// what failed: "verified 3 backups (2 full, 1 incremental) and the binlog archive (2
// files, 5 segments): 2 OK, 1 FAILED: ID".
func summaryLine(sum *verify.Summary, as *binlog.Summary, aerr error) string {
	var full, inc int
	for _, res := range sum.Results {
		if res.Incremental {
			inc++
		} else {
			full++
		}
	}
	n := len(sum.Results) + len(sum.Unreadable)
	kinds := fmt.Sprintf("%d full, %d incremental", full, inc)
	if len(sum.Unreadable) > 0 {
		kinds += fmt.Sprintf(", %d with an unreadable manifest", len(sum.Unreadable))
	}
	line := fmt.Sprintf("verified %d backup%s (%s)", n, plural(n), kinds)
	switch {
	case as == nil && aerr == nil:
		line += " and no binlog archive"
	case as == nil:
		line += " and the binlog archive"
	default:
		line += fmt.Sprintf(" and the binlog archive (%d files, %d segments)", as.Files, as.Segments)
	}
	failed := sum.Failed()
	line += fmt.Sprintf(": %d OK, %d FAILED", n-len(failed), len(failed))
	if len(failed) > 0 {
		line += ": " + strings.Join(ids(failed), ", ")
	}
	if aerr != nil {
		line += "; the binlog archive FAILED"
	}
	if sum.Unfinished > 0 {
		line += fmt.Sprintf(" (%d unfinished backup%s not verified: ferry list --all shows them)", sum.Unfinished, plural(sum.Unfinished))
	}
	return line
}

// ids are the backups of results.
func ids(results []verify.Result) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i] = r.ID
	}
	return out
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// verifyArchive re-reads the whole binlog archive and fails on any problem; it
// returns what it checked (nil if there is no archive).
func verifyArchive(cmd *cobra.Command, g *globals, r *repo.Repo, ids []age.Identity) (*binlog.Summary, error) {
	a, err := binlog.Open(r.Storage(), binlog.Options{Identities: ids})
	if err != nil {
		return nil, err
	}
	s, err := a.Verify(cmd.Context())
	if err != nil {
		return nil, err
	}
	out := cmd.OutOrStdout()
	if s.Files == 0 && len(s.Gaps) == 0 {
		fmt.Fprintln(out, "binlog archive: none (ferry binlog-archive keeps one)")
		return nil, nil
	}
	for _, gap := range s.Gaps {
		fmt.Fprintf(out, "GAP: %s\n", gap)
	}
	if len(s.Problems) > 0 {
		for _, p := range s.Problems {
			fmt.Fprintf(out, "PROBLEM: %s\n", p)
		}
		return s, fmt.Errorf("binlog archive at %s: %d problems (listed above)", a.Location(), len(s.Problems))
	}
	last := "none"
	if s.LastGroup != nil {
		last = s.LastGroup.GTID.String()
	}
	g.log.Info("binlog archive verified", "files", s.Files, "segments", s.Segments, "transactions", s.Groups, "gaps", len(s.Gaps))
	fmt.Fprintf(out, "binlog archive OK: %d files, %d segments (%s stored), %d transactions, %s to %s, last GTID %s, %d recorded gaps\n",
		s.Files, s.Segments, human(s.StoredBytes), s.Groups, s.First, s.End, last, len(s.Gaps))
	return s, nil
}
