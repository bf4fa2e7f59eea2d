package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newRestoreCmd(g *globals) *cobra.Command {
	var cfg restore.Config
	var from, identity, writeCnf string
	var dirMaps []string
	var rf repoFlags
	cfg.MaxMemory = 256 << 20
	cmd := &cobra.Command{
		Use:   "restore (--target-dir DIR | --from FILE|- | --repo REPO ID|latest) --datadir DATADIR",
		Short: "Restore a backup directory, stream or repository backup into a datadir (copy-back, or --move), preparing it if needed",
		Example: `  ferry restore --target-dir /backups/full-1 --datadir /var/lib/mysql-new
  ferry restore --repo s3://bucket/prod-db1 latest --datadir /var/lib/mysql-new [--identity-file key.txt] [--resume]
  ssh db1 ferry backup --stream | ferry restore --from - --datadir /var/lib/mysql-new
  mariadb-backup --backup --stream=xbstream | ferry restore --from - --datadir /var/lib/mysql-new
  The datadir must be new or empty (or pass --replace to move the old one aside); files are
  verified against the manifest, assembled in a staging directory and renamed into place.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Log, cfg.Progress, cfg.Terminal = g.log, os.Stderr, stderrIsTerminal()
			if err := checkNewFile(writeCnf, "--write-cnf"); err != nil {
				return err
			}
			if err := parseDirMaps(&cfg.DataDirs, dirMaps); err != nil {
				return err
			}
			if err := openRepoSource(cmd, g, &cfg, &rf, args, identity, from); err != nil {
				return err
			}
			done, err := openSource(&cfg, from, identity)
			if err != nil {
				return err
			}
			defer done()
			res, err := restore.Restore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			g.log.Info("restore completed OK", "datadir", res.Datadir, "from", res.Backup.Origin(), "made_by", res.Backup.Tool())
			if res.MovedAside != "" {
				g.log.Info("the previous datadir was kept", "path", res.MovedAside)
			}
			if writeCnf != "" {
				if err := os.WriteFile(writeCnf, res.Options.Cnf(res.Datadir), 0o644); err != nil {
					return fmt.Errorf("--write-cnf: %w", err)
				}
				g.log.Info("wrote the options the restored datadir needs", "file", writeCnf)
			}
			printReplication(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.BackupDir, "target-dir", "", "backup directory to restore from")
	f.StringVar(&from, "from", "", "restore from an xbstream file, or - for stdin (ferry backup --stream, mariadb-backup --stream=xbstream)")
	rf.add(f)
	f.BoolVar(&cfg.Resume, "resume", false, "continue an interrupted restore from --repo: what its staging directory holds is verified, not downloaded again")
	f.StringVar(&identity, "identity-file", "", "age identity (secret key) file for an encrypted stream or repository backup")
	f.Var(byteSize{&cfg.MaxMemory}, "max-memory", "memory for stream data waiting to be written")
	f.StringVar(&cfg.Datadir, "datadir", "", "datadir to create (required; must be new or empty)")
	f.BoolVar(&cfg.Move, "move", false, "move files out of the backup instead of copying (the backup is consumed)")
	f.BoolVar(&cfg.Replace, "replace", false, "move a non-empty datadir aside (kept as DATADIR.ferry-old-TIME) and restore in its place")
	f.StringVar(&cfg.Owner, "owner", "", "user[:group] owning the restored files when run as root (default: the datadir's or its parent's owner)")
	f.IntVar(&cfg.Parallel, "parallel", 0, "parallel copy workers for a directory (default: cores), objects downloaded at once from a repository (default 8); a stream is decoded by one goroutine per file")
	f.StringVar(&cfg.Mariadbd, "mariadbd", "", "mariadbd binary for prepare (default: found on PATH or /usr/sbin)")
	f.StringVar(&cfg.UseMemory, "use-memory", "256M", "InnoDB buffer pool for recovery")
	addKeyFlags(f, &cfg.Keys)
	f.StringArrayVar(&dirMaps, "data-directory-map", nil, "OLD=NEW: put DATA DIRECTORY tablespaces that were under OLD under NEW instead (repeatable; default: their original paths, which must be free)")
	f.BoolVar(&cfg.DataDirs.Inside, "no-data-directory", false, "put DATA DIRECTORY tablespaces inside the datadir as ordinary tablespaces")
	f.StringVar(&writeCnf, "write-cnf", "", "write the options the restored datadir needs (datadir, InnoDB page size, system and undo tablespaces, ...) as a [mysqld] group to this new file")
	cmd.MarkFlagRequired("datadir")
	return cmd
}

// printReplication prints the statements that make the restored server a replica of
// the backed-up one from the backup's exact position.
func printReplication(w io.Writer, res *restore.Result) {
	gtid := res.Coordinates.ReplicaGTID()
	fmt.Fprintf(w, "Restored %s. Start it with: %s\n", res.Datadir, startCommand(res.Datadir, res.Options))
	if gtid == "" && res.Coordinates.BinlogFile == "" {
		fmt.Fprintln(w, "The source had no binary log position; it cannot seed a replica.")
		return
	}
	fmt.Fprintf(w, "Binlog position: %s:%d  GTID: %s\n", res.Coordinates.BinlogFile, res.Coordinates.BinlogPos, gtid)
	fmt.Fprintln(w, "To make it a replica of the backed-up server, run on it:")
	fmt.Fprintf(w, "  SET GLOBAL gtid_slave_pos = '%s';\n", gtid)
	fmt.Fprintln(w, "  CHANGE MASTER TO MASTER_HOST='<source host>', MASTER_PORT=3306, MASTER_USER='<repl user>', MASTER_PASSWORD='<password>', MASTER_USE_GTID=slave_pos;")
	fmt.Fprintln(w, "  START SLAVE;")
}

// openRepoSource opens --repo and names the backup to restore.
func openRepoSource(cmd *cobra.Command, g *globals, cfg *restore.Config, rf *repoFlags, args []string, identity, from string) error {
	switch {
	case rf.url == "" && len(args) > 0:
		return fmt.Errorf("unexpected argument %q: a backup id goes with --repo", args[0])
	case rf.url == "" && cfg.Resume:
		return errors.New("--resume applies to --repo")
	case rf.url == "":
		if cfg.Parallel == 0 {
			cfg.Parallel = defaultParallel()
		}
		return nil
	case cfg.BackupDir != "" || from != "":
		return errors.New("give one of --target-dir, --from or --repo")
	case len(args) == 0:
		return errors.New("--repo needs the backup to restore: an id from ferry list, or latest")
	case cfg.Move:
		return errors.New("--move applies to --target-dir")
	}
	r, err := rf.open(cmd.Context(), g.log, false, version)
	if err != nil {
		return err
	}
	cfg.Repo, cfg.BackupID = r, args[0]
	if identity != "" {
		if cfg.Identities, err = codec.Identities(identity); err != nil {
			return err
		}
	}
	return nil
}

// openSource checks --target-dir/--from and opens the stream; done closes it.
func openSource(cfg *restore.Config, from, identity string) (func(), error) {
	none := func() {}
	if cfg.Repo != nil {
		return none, nil
	}
	switch {
	case from != "" && cfg.BackupDir != "":
		return none, errors.New("give either --target-dir or --from, not both")
	case from == "" && cfg.BackupDir == "":
		return none, errors.New("--target-dir DIR or --from FILE|- is required")
	case from == "" && identity != "":
		return none, errors.New("--identity-file applies to --from (encrypted streams)")
	case from != "" && cfg.Move:
		return none, errors.New("--move applies to --target-dir: a stream is always written straight into the datadir")
	case from == "":
		return none, nil
	}
	if identity != "" {
		ids, err := codec.Identities(identity)
		if err != nil {
			return none, err
		}
		cfg.Identities = ids
	}
	if from == "-" {
		if term.IsTerminal(int(os.Stdin.Fd())) {
			return none, errors.New("--from - reads the stream from stdin, which is a terminal: pipe the backup into ferry")
		}
		cfg.Stream, cfg.StreamName = os.Stdin, "stdin"
		return none, nil
	}
	f, err := os.Open(from)
	if err != nil {
		return none, fmt.Errorf("--from: %w", err)
	}
	cfg.Stream, cfg.StreamName = f, from
	return func() { f.Close() }, nil
}

// startCommand is the mariadbd command line that opens a restored datadir: every
// layout option it needs (a server started without them refuses it or damages it).
func startCommand(datadir string, o restore.ServerOptions) string {
	return strings.Join(append([]string{"mariadbd", "--datadir=" + datadir}, o.Args()...), " ")
}

// checkNewFile refuses an output file that exists: ferry never overwrites a file the
// user has.
func checkNewFile(path, flag string) error {
	if path == "" {
		return nil
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s %s exists: ferry does not overwrite it; remove it or name a new file", flag, path)
	}
	return nil
}

// parseDirMaps reads --data-directory-map values into d.
func parseDirMaps(d *restore.DataDirs, maps []string) error {
	if d.Inside && len(maps) > 0 {
		return errors.New("--no-data-directory and --data-directory-map exclude each other: choose one")
	}
	for _, s := range maps {
		m, err := restore.ParseDirMap(s)
		if err != nil {
			return err
		}
		d.Map = append(d.Map, m)
	}
	return nil
}
