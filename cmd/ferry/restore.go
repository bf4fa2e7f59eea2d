package main

import (
	"fmt"
	"github.com/ferry-backup/ferry/internal/mysql"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/stream"
	"github.com/ferry-backup/ferry/internal/tableimport"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

func newRestoreCmd(g *globals) *cobra.Command {
	var cfg restore.Config
	var sf sourceFlags
	var writeCnf string
	var dirMaps []string
	var pf pitrFlags
	var tf tableFlags
	sf.maxMemory = 256 << 20
	var jm jobMetrics
	cmd := &cobra.Command{
		Use:   "restore (--target-dir DIR | --from FILE|- | --repo REPO ID|latest | --repo REPO --to-gtid G|--to-time T) (--datadir DATADIR | --tables T --into-server)",
		Short: "Restore a backup directory, stream or repository backup into a datadir (copy-back, or --move), preparing it if needed",
		Example: `  ferry restore --target-dir /backups/full-1 --datadir /var/lib/mysql-new
  ferry restore --repo s3://bucket/prod-db1 latest --datadir /var/lib/mysql-new [--identity-file key.txt] [--resume]
  ssh db1 ferry backup --stream | ferry restore --from - --datadir /var/lib/mysql-new
  mariadb-backup --backup --stream=xbstream | ferry restore --from - --datadir /var/lib/mysql-new
  ferry restore --target-dir /b/full --incremental-dir /b/inc1 --incremental-dir /b/inc2 --datadir /var/lib/mysql-new
  ferry restore --from full.xbs --from inc1.xbs --datadir /var/lib/mysql-new     # a chain of streams, oldest first
  ferry restore --repo s3://bucket/prod-db1 --to-time '2026-11-24 13:04:59 +01:00' --datadir /var/lib/mysql-new
  ferry restore --repo s3://bucket/prod-db1 --to-time '2026-11-24 13:04:59 Europe/Berlin' --datadir /var/lib/mysql-new
  ferry restore --repo s3://bucket/prod-db1 --to-gtid 0-1-12345 --datadir /var/lib/mysql-new
  ferry restore --repo s3://bucket/prod-db1 latest --tables shop.orders --into-server --rename-to orders_restored
  ferry restore --target-dir /backups/full-1 --tables 'shop.orders,shop.items' --into-server --replace-tables
  --tables with --into-server brings tables back into the running server (docs/operations.md).
  --to-time/--to-gtid restore the newest backup before the point and apply the binlog that
  ferry binlog-archive stored (docs/binlog-archive.md).
  A chain of incrementals is applied into one staging copy and recovered once (docs/incremental.md).
  The datadir must be new or empty (or pass --replace to move the old one aside); files are
  verified against the manifest, assembled in a staging directory and renamed into place.`,
		Args: cobra.MaximumNArgs(1),
		RunE: jm.wrap("restore", g, func(cmd *cobra.Command, args []string) error {
			cfg.Log, cfg.Progress, cfg.Terminal = g.log, os.Stderr, g.barOnStderr()
			limitRecoveryMemory(cfg.UseMemory, sf.streamedMemory())
			if err := checkNewFile(writeCnf, "--write-cnf"); err != nil {
				return err
			}
			if err := parseDirMaps(&cfg.DataDirs, dirMaps); err != nil {
				return err
			}
			open := sf.open
			if pf.set() {
				open = func(cmd *cobra.Command, g *globals, args []string) (restore.Source, func(), error) {
					return pf.source(cmd, g, &sf, args, &cfg)
				}
			}
			if tf.set() && sf.move {
				return usageErr("--move does not apply to --tables: the copy the tables are exported from is removed afterwards, and the backup would go with it; restore the tables without --move")
			}
			if tf.set() {
				job, err := tf.start(cmd.Context(), &cfg, g)
				if err != nil {
					return err
				}
				defer job.Close()
				return restoreTables(cmd, g, args, open, &cfg, job)
			}
			if cfg.Datadir == "" {
				return usageErr("--datadir is required (or --tables with --into-server)")
			}
			src, done, err := open(cmd, g, args)
			if err != nil {
				return err
			}
			defer done()
			cfg.Source = src
			res, err := restore.Restore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if m := res.Backup.Manifest; m != nil {
				jm.set("restored_bytes", float64(m.TotalSize()))
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
			if cfg.FromSource {
				printSourceReplication(cmd.OutOrStdout(), res)
				return nil
			}
			printReplication(cmd.OutOrStdout(), res)
			return nil
		}),
	}
	f := cmd.Flags()
	jm.addFile(f)
	sf.add(f)
	pf.add(f)
	f.StringVar(&cfg.Datadir, "datadir", "", "datadir to create (required, but with --into-server; must be new or empty)")
	f.BoolVar(&cfg.Replace, "replace", false, "move a non-empty datadir aside (kept as DATADIR.ferry-old-TIME) and restore in its place")
	f.StringVar(&cfg.Owner, "owner", "", "user[:group] owning the restored files when run as root (default: the existing datadir's owner unless root, else the mysql user, else the parent's owner)")
	f.StringVar(&cfg.Mariadbd, "mariadbd", "", mariadbdHelp)
	f.StringVar(&cfg.UseMemory, "use-memory", "256M", "memory for recovery: ferry's redo apply batch, or the stock server's buffer pool")
	addRecoveryFlag(f, &cfg.Recovery)
	addKeyFlags(f, &cfg.Keys)
	f.StringArrayVar(&dirMaps, "data-directory-map", nil, "OLD=NEW: put DATA DIRECTORY tablespaces that were under OLD under NEW instead (repeatable; default: their original paths, which must be free)")
	f.BoolVar(&cfg.DataDirs.Inside, "no-data-directory", false, "put DATA DIRECTORY tablespaces inside the datadir as ordinary tablespaces")
	f.BoolVar(&cfg.Galera, "galera", false, "write grastate.dat at the backup's Galera position, so that a node started on the datadir joins its cluster by IST (the backup must come from a Galera node)")
	f.BoolVar(&cfg.FromSource, "replicate-from-source", false, "the backup is of a replica (backup --slave-info): print how to make the restored server a replica of that replica's source, not of the replica")
	f.StringVar(&writeCnf, "write-cnf", "", "write the options the restored datadir needs (datadir, InnoDB page size, system and undo tablespaces, ...) as a [mysqld] group to this new file")
	tf.add(f)
	return cmd
}

// restoreTables restores the backup aside and imports the tables of tf into the
// running server.
func restoreTables(cmd *cobra.Command, g *globals, args []string, open func(*cobra.Command, *globals, []string) (restore.Source, func(), error), cfg *restore.Config, job *tableimport.Job) error {
	src, done, err := open(cmd, g, args)
	if err != nil {
		return err
	}
	defer done()
	cfg.Source = src
	if err := checkInBackup(cmd.Context(), cfg, job); err != nil {
		return err
	}
	res, err := restore.Restore(cmd.Context(), *cfg)
	if err != nil {
		return err
	}
	out, err := job.Import(cmd.Context())
	printTables(cmd.OutOrStdout(), res, out)
	return err
}

// printReplication prints the statements that make the restored server a replica of
// the backed-up one from the backup's exact position.
func printReplication(w io.Writer, res *restore.Result) {
	gtid := res.Coordinates.ReplicaGTID()
	fmt.Fprintf(w, "Restored %s%s. Start it with: %s\n", res.Datadir, ownedBy(res.Owner), startCommand(serverOf(res.Backup), res.Datadir, res.Options))
	if g := res.Coordinates.Galera; g != nil {
		fmt.Fprintf(w, "Galera position: %s (domain %d). As a new node of that cluster, restore with --galera (it writes grastate.dat) or start it with --wsrep-start-position=%s, and it joins by IST while a donor's gcache holds the write-sets since.\n", g, g.Domain, g)
	}
	if gtid == "" && res.Coordinates.BinlogFile == "" {
		fmt.Fprintln(w, "The source had no binary log position; it cannot seed a replica.")
		return
	}
	fmt.Fprintf(w, "Binlog position: %s:%d  GTID: %s\n", res.Coordinates.BinlogFile, res.Coordinates.BinlogPos, gtid)
	fmt.Fprintln(w, "To make it a replica of the backed-up server, run on it:")
	host, port := sourceAddress(res.Backup)
	if res.Backup.IsMySQL() {
		printStatements(w, mysql.ReplicaSetup(res.Backup.ServerVersion, gtid, mysql.Source{Host: host, Port: port, User: "<repl user>", Password: "<password>"}))
		return
	}
	printStatements(w, mariadb.ReplicaSetup(gtid, mariadb.ChangeMaster{Host: host, Port: port, User: "<repl user>", Password: "<password>", UseGTID: "slave_pos"}))
}

// sourceAddress is where the backed-up server said replicas reach it (its manifest),
// or a placeholder and the default port for a backup that does not say.
func sourceAddress(b *restore.Backup) (string, int) {
	host, port := "<source host>", 3306
	if b == nil || b.Manifest == nil {
		return host, port
	}
	if h := b.Manifest.Server.Host; h != "" {
		host = h
	}
	if p := b.Manifest.Server.Port; p > 0 {
		port = p
	}
	return host, port
}

// printSourceReplication prints the statements that make the restored server a replica
// of the source the backed-up replica replicated from (restore checked there is one).
func printSourceReplication(w io.Writer, res *restore.Result) {
	c := res.Coordinates
	src := c.Sources[0]
	fmt.Fprintf(w, "Restored %s%s. Start it with: %s\n", res.Datadir, ownedBy(res.Owner), startCommand(serverOf(res.Backup), res.Datadir, res.Options))
	fmt.Fprintf(w, "The backup was taken on a replica of %s:%d at gtid_slave_pos %s (its file %s:%d).\n", src.Host, src.Port, c.GTIDSlavePos, src.File, src.Pos)
	fmt.Fprintln(w, "To make it a replica of that source, run on it:")
	printStatements(w, mariadb.ReplicaSetup(c.GTIDSlavePos, mariadb.ChangeMaster{Host: src.Host, Port: src.Port, User: "<repl user>", Password: "<password>", UseGTID: "slave_pos"}))
}

// printStatements prints SQL statements for the user to run, indented.
func printStatements(w io.Writer, stmts []string) {
	for _, s := range stmts {
		fmt.Fprintln(w, "  "+s)
	}
}

// sourceFlags are the flags that say where a restore reads its backup from.
type sourceFlags struct {
	dir, identity string
	from          []string // a stream, then its incrementals' streams
	incDirs       []string // --incremental-dir, oldest first
	repo          repoFlags
	resume, move  bool
	parallel      int
	maxMemory     int64
}

// streamedMemory is the memory the source holds of its own: --max-memory, unless the
// backup is a directory read where it is.
func (sf *sourceFlags) streamedMemory() int64 {
	if len(sf.from) == 0 && sf.repo.url == "" {
		return 0
	}
	return sf.maxMemory
}

// add declares the source flags.
func (sf *sourceFlags) add(f *pflag.FlagSet) {
	f.StringVar(&sf.dir, "target-dir", "", "backup directory to restore from")
	f.StringArrayVar(&sf.from, "from", nil, "restore from an xbstream file, or - for stdin (ferry backup --stream, mariadb-backup --stream=xbstream); repeat it for a full backup's stream followed by its incrementals', oldest first")
	f.StringArrayVar(&sf.incDirs, "incremental-dir", nil, "an incremental backup directory to apply on --target-dir (repeat it for each, oldest first): the chain is restored with one recovery")
	sf.repo.add(f)
	sf.repo.addTrust(f)
	f.BoolVar(&sf.resume, "resume", false, "continue an interrupted restore from --repo (what its staging directory holds is verified, not downloaded again) or with --move (the files it moved are used where they are)")
	f.StringVar(&sf.identity, "identity-file", "", "age identity (secret key) file for an encrypted stream or repository backup")
	f.Var(byteSize{&sf.maxMemory}, "max-memory", "memory for stream data waiting to be written")
	f.BoolVar(&sf.move, "move", false, "move files out of the backup instead of copying (the backup is consumed once recovery begins; a failure before puts every file back, one after keeps them for --resume)")
	f.IntVar(&sf.parallel, "parallel", 0, fmt.Sprintf("parallel copy workers for a directory (default: one per core), objects downloaded at once from a repository (default %d); a stream is decoded by one goroutine per file", defaults.Downloads))
}

// open checks the flags and opens the source they name (a chain of them for
// incrementals); done closes what it opened.
func (sf *sourceFlags) open(cmd *cobra.Command, g *globals, args []string) (restore.Source, func(), error) {
	none := func() {}
	if err := sf.check(args); err != nil {
		return nil, none, err
	}
	ids, err := sf.identities()
	if err != nil {
		return nil, none, err
	}
	switch {
	case sf.repo.url != "":
		src, err := sf.repoSource(cmd, g, args[0], ids)
		return src, none, err
	case sf.dir != "":
		links := []restore.Source{&restore.DirSource{Dir: sf.dir, Move: sf.move, Resume: sf.resume, Parallel: sf.parallel}}
		for _, d := range sf.incDirs {
			links = append(links, &restore.DirSource{Dir: d, Parallel: sf.parallel})
		}
		return chain(links), none, nil
	}
	var links []restore.Source
	var files []*os.File
	done := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, from := range sf.from {
		if from == "-" {
			if term.IsTerminal(int(os.Stdin.Fd())) {
				return nil, none, usageErr("--from - reads the stream from stdin, which is a terminal: pipe the backup into ferry")
			}
			links = append(links, stream.NewSource(os.Stdin, "stdin", ids, sf.maxMemory))
			continue
		}
		f, err := os.Open(from)
		if err != nil {
			done()
			return nil, none, fmt.Errorf("--from: %w", err)
		}
		files = append(files, f)
		links = append(links, stream.NewSource(f, from, ids, sf.maxMemory))
	}
	return chain(links), done, nil
}

// repoSource is a repository backup, resolved to its chain if it is incremental.
func (sf *sourceFlags) repoSource(cmd *cobra.Command, g *globals, id string, ids []age.Identity) (restore.Source, error) {
	r, err := sf.repo.open(cmd.Context(), g.log, false, version)
	if err != nil {
		return nil, err
	}
	ms, err := r.Chain(cmd.Context(), id, ids)
	if err != nil {
		return nil, err
	}
	var links []restore.Source
	for _, m := range ms {
		links = append(links, &repo.Source{Repo: r, BackupID: m.ID, Manifest: m, Resume: sf.resume, Identities: ids, Parallel: sf.parallel})
	}
	return chain(links), nil
}

// chain is the one source, or the chain of a full backup and its incrementals.
func chain(links []restore.Source) restore.Source {
	if len(links) == 1 {
		return links[0]
	}
	return &restore.ChainSource{Links: links}
}

// check refuses flags that do not go together.
func (sf *sourceFlags) check(args []string) error {
	named := 0
	stdin := 0
	for _, v := range sf.from {
		if v == "-" {
			stdin++
		}
	}
	for _, v := range []string{sf.dir, strings.Join(sf.from, ","), sf.repo.url} {
		if v != "" {
			named++
		}
	}
	switch {
	case named == 0:
		return usageErr("--target-dir DIR, --from FILE|- or --repo REPO is required")
	case named > 1:
		return usageErr("give one of --target-dir, --from or --repo")
	case sf.repo.url == "" && len(args) > 0:
		return usagef("unexpected argument %q: a backup id goes with --repo", args[0])
	case sf.repo.url != "" && len(args) == 0:
		return usageErr("--repo needs the backup to restore: an id from ferry list, or latest")
	case sf.repo.url == "" && sf.resume && !sf.move:
		return usageErr("--resume applies to --repo and to --target-dir with --move")
	case stdin > 1:
		return usageErr("--from - reads stdin, which can carry one stream: give the others as files")
	case len(sf.incDirs) > 0 && sf.dir == "":
		return usageErr("--incremental-dir applies on --target-dir (for streams repeat --from; a repository resolves the chain itself)")
	case len(sf.incDirs) > 0 && sf.move:
		return usageErr("--move does not apply to a chain of incrementals: the full backup is copied, then the deltas written into the copy")
	case sf.dir == "" && sf.move:
		return usageErr("--move applies to --target-dir: a stream or repository backup is always written straight into the datadir")
	case sf.dir != "" && sf.identity != "":
		return usageErr("--identity-file applies to --from and --repo (encrypted streams and repositories)")
	case sf.repo.url == "" && sf.repo.trust != "":
		return usageErr("--trust-key applies to --repo: only repository backups are signed")
	}
	return nil
}

// identities reads --identity-file, if given.
func (sf *sourceFlags) identities() ([]age.Identity, error) {
	if sf.identity == "" {
		return nil, nil
	}
	return codec.Identities(sf.identity)
}

// startCommand is the mariadbd command line that opens a restored datadir: every
// layout option it needs (a server started without them refuses it or damages it).
func startCommand(server, datadir string, o restore.ServerOptions) string {
	return strings.Join(append([]string{server, "--datadir=" + datadir}, o.Args()...), " ")
}

// serverOf is the server program that runs b's datadir.
func serverOf(b *restore.Backup) string {
	if b.IsMySQL() {
		return "mysqld"
	}
	return "mariadbd"
}

// ownedBy says, in the start hint, who owns the restored files (run as root).
func ownedBy(owner string) string {
	if owner == "" {
		return ""
	}
	return ", owned by " + owner
}

// checkNewFile refuses an output file that exists: ferry never overwrites a file the
// user has.
func checkNewFile(path, flag string) error {
	if path == "" {
		return nil
	}
	if _, err := os.Lstat(path); err == nil {
		return usagef("%s %s exists: ferry does not overwrite it; remove it or name a new file", flag, path)
	}
	return nil
}

// parseDirMaps reads --data-directory-map values into d.
func parseDirMaps(d *restore.DataDirs, maps []string) error {
	if d.Inside && len(maps) > 0 {
		return usageErr("--no-data-directory and --data-directory-map exclude each other: choose one")
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
