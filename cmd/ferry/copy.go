package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/spf13/cobra"
)

func newCopyCmd(g *globals) *cobra.Command {
	from := repoFlags{which: setting.CopySource}
	to := repoFlags{which: setting.CopyTarget}
	o := repo.CopyOptions{MaxMemory: defaults.PipelineMemory}
	cmd := &cobra.Command{
		Use:   "copy --from REPO --to REPO (ID | latest | --all)",
		Short: "Copy backups (with the backups they apply on) and the binlog archive from one repository to another, as stored",
		Example: `  ferry copy --from /mnt/backups/db1 --to s3://offsite/db1 latest
  ferry copy --from s3://backups/db1 --to s3://offsite/db1 --all --trust-key ferrysign1...
  Copies each object as stored (nothing is decrypted: no key is needed, a signed backup
  stays signed), checking its size and CRC-32C (and SHA-256, signed) against the
  manifest before writing it. An incremental brings the backups it applies on; the
  binlog archive is copied too. A backup's manifest is written last: until then the
  target lists it as running, and as incomplete if the copy was cut short. Run the
  same command again to finish an interrupted copy: objects and backups the target
  already holds are skipped. A backup the target holds with another manifest is
  refused, never overwritten. The target is created if it holds no repository.
  Both repositories take the same S3 options, environment and profile.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := copyTarget(args, o.All, from.url, to.url)
			if err != nil {
				return err
			}
			to.s3 = from.s3
			src, err := from.open(cmd.Context(), g.log, false, version)
			if errors.Is(err, repo.ErrNoRepository) {
				return usagef("--from %s holds no ferry repository (no %s): check the location", from.url, repo.ConfigKey)
			}
			if err != nil {
				return err
			}
			dst, err := to.open(cmd.Context(), g.log, true, version)
			if err != nil {
				return err
			}
			o.Version, o.Log, o.Progress, o.Terminal = version, g.log, os.Stderr, g.barOnStderr()
			st, err := src.CopyTo(cmd.Context(), dst, id, o)
			if err != nil && st == (repo.CopyStats{}) {
				return err // refused before anything was copied
			}
			printCopy(cmd.OutOrStdout(), st)
			g.log.Info("copy finished", "from", src.Location(), "to", dst.Location(), "ok", err == nil,
				"backups", st.Backups, "backups_there", st.BackupsThere, "objects", st.Objects, "bytes", st.Bytes,
				"objects_there", st.ObjectsThere, "bytes_there", st.BytesThere, "archive_objects", st.Archive)
			return err
		},
	}
	f := cmd.Flags()
	f.Var(onceString{v: &from.url, set: new(bool), hint: "copy from one repository per run"}, "from", "repository to copy from: s3://bucket/prefix, or a directory (or file:///dir)")
	f.Var(onceString{v: &to.url, set: new(bool), hint: "copy to one repository per run"}, "to", "repository to copy to, created if the location holds none (a directory must exist, a bucket too)")
	from.addS3(f)
	from.addTrust(f)
	f.BoolVar(&o.All, "all", false, "copy every complete backup of the source")
	f.Var(byteSize{&o.MaxMemory}, "max-memory", "memory for the objects being copied (each is held whole while it is checked and written; at least the largest object)")
	f.IntVar(&o.Parallel, "parallel", defaults.Uploads, "most objects copied at once (fewer when --max-memory holds fewer of the largest object)")
	return cmd
}

// copyTarget checks the command line and returns the backup to copy ("" with --all).
func copyTarget(args []string, all bool, from, to string) (string, error) {
	switch {
	case from == "" || to == "":
		return "", usageErr("--from and --to are required: the repository to copy from and the one to copy to")
	case all && len(args) > 0:
		return "", usagef("--all copies every backup: name no backup (%s)", args[0])
	case !all && len(args) == 0:
		return "", usageErr("name the backup to copy (an ID, or latest) or give --all")
	case all:
		return "", nil
	}
	return args[0], nil
}

// printCopy writes the copy's summary line.
func printCopy(w io.Writer, st repo.CopyStats) {
	fmt.Fprintf(w, "copied %d backups (%d already complete in the target), %d binlog archive objects: %d objects copied, %d bytes (%s); %d objects already there, %d bytes (%s)\n",
		st.Backups, st.BackupsThere, st.Archive, st.Objects, st.Bytes, human(st.Bytes), st.ObjectsThere, st.BytesThere, human(st.BytesThere))
}
