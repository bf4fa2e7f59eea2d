package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/signing"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/stream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// backupFlags are the flags that need checking before they become a backup.Config.
type backupFlags struct {
	signWith    string
	chunk       int64
	targetDir   string
	stream      bool
	repo        repoFlags
	compress    string
	level       int
	encryptTo   []string
	encryptFile []string
	maxMemory   int64
	partSize    int64
	uploads     int
	// incremental: on a base directory, an LSN, or (repository) the newest backup of
	// this server or a named one
	incBasedir string
	incLSN     uint64
	incRepo    bool
	incBase    string
	resume     bool    // continue the newest interrupted backup of this host in the repository
	maxImpact  float64 // percent
	lockDays   int     // repository: S3 Object Lock retention
	lockMode   string
	pace       string // auto or off
	// a partial backup
	databases, tables, exclude string
}

func newBackupCmd(g *globals) *cobra.Command {
	var cfg backup.Config
	var fl backupFlags
	var jm jobMetrics
	fl.maxMemory = defaults.PipelineMemory
	cmd := &cobra.Command{
		Use:   "backup (--target-dir DIR | --stream | --repo REPO) [connection options]",
		Short: "Take a hot full or incremental backup of a running MariaDB into a directory, an xbstream on stdout, or a repository (S3 or a directory)",
		Example: `  ferry backup --socket /run/mysqld/mysqld.sock --user backup --password-file /etc/ferry/pw --target-dir /backups/full-1
  ferry backup --repo s3://bucket/prod-db1 --encrypt-to age1...    # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... or a profile
  ferry backup --stream --compress zstd --encrypt-to age1... | ssh host2 'ferry restore --from - --identity-file key.txt --datadir /var/lib/mysql-new'
  ferry backup --stream --compress none > full.xbstream     # mbstream -x -C dir < full.xbstream unpacks it
  ferry backup --socket /run/mysqld/mysqld.sock --user backup --target-dir /backups/inc-1 --incremental-basedir /backups/full-1
  ferry backup --repo s3://bucket/prod-db1 --incremental      # on the newest backup of this server in the repository
  ferry backup --repo s3://bucket/prod-db1 --databases 'shop crm.contacts'   # a partial backup
  ferry backup --repo s3://bucket/prod-db2 --slave-info --safe-slave-backup  # on a replica
  ferry backup --repo s3://locked-bucket/prod-db1 --lock-days 35   # immutable: a bucket with Object Lock enabled
  ferry backup --repo s3://bucket/prod-db1 --max-impact 10 --metrics-file /var/lib/node_exporter/ferry_backup.prom
  Options can also come from [ferry] and [ferry-backup] in the option files (docs/operations.md).
  The server keeps serving reads and writes; a directory has mariabackup's layout plus ferry_manifest.json.`,
		Args: cobra.NoArgs,
		RunE: jm.wrap("backup", g, func(cmd *cobra.Command, _ []string) error {
			cfg.Log, cfg.Progress, cfg.Terminal = g.log, os.Stderr, g.barOnStderr()
			if err := fl.apply(cmd, &cfg); err != nil {
				return err
			}
			cfg.Version = version
			cfg.Command = strings.Join(os.Args[1:], " ")
			// A no-op unless built with -tags testhooks (the e2e tests' binary).
			applyTestHooks(&cfg)
			start := time.Now() // the manifest's end time is the consistent point; uploads may go on after it
			res, err := backup.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			m := res.Manifest
			g.log.Info("backup completed OK", "to", cfg.Sink.Name(), "id", m.ID, "bytes", m.TotalSize(), "stored_bytes", m.StoredSize(),
				"took", time.Since(start).Round(time.Millisecond), "block_ddl", res.BlockDDL.Round(time.Microsecond), "block_commit", res.BlockCommit.Round(time.Microsecond),
				"start_lsn", m.StartLSN, "end_lsn", m.EndLSN, "to_lsn", m.ChainLSN(), "gtid", m.Coordinates.GTIDBinlogPos, "page_rereads", res.PageRereads, "free_pages", res.FreePages,
				"recopy_rounds", res.Rounds, "pages_recopied", res.PagesRecopied, "redo_kept", m.LastLSN-m.StartLSN)
			reportResumed(g, cfg.Sink, res)
			jm.set("read_bytes", float64(m.TotalSize()))
			jm.set("stored_bytes", float64(m.StoredSize()))
			jm.set("redo_kept_bytes", float64(m.LastLSN-m.StartLSN))
			jm.set("pages_recopied", float64(res.PagesRecopied))
			jm.set("page_rereads", float64(res.PageRereads))
			jm.set("lock_seconds", res.BlockCommit.Seconds())
			jm.set("block_ddl_seconds", res.BlockDDL.Seconds())
			jm.set("block_commit_seconds", res.BlockCommit.Seconds())
			switch {
			case fl.repo.url != "":
				fmt.Fprintln(cmd.OutOrStdout(), m.ID)
			case !fl.stream:
				fmt.Fprintln(cmd.OutOrStdout(), fl.targetDir)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	addConnFlags(f, &cfg.Conn)
	jm.addFile(f)
	f.StringVar(&fl.targetDir, "target-dir", "", "new or empty directory to write the backup to")
	f.Var(streamFlag{&fl.stream}, "stream", "write an xbstream to stdout instead of a directory (mbstream -x can unpack it); --stream=xbstream and --stream=mbstream, as mariabackup takes them, say the same")
	f.Lookup("stream").NoOptDefVal = "true"
	fl.repo.add(f)
	f.StringVar(&fl.signWith, "sign-with", "", "repository: sign the backup's manifest with this key file (ferry keygen --signing), recording every object's SHA-256, so that restore and verify --trust-key can refuse a backup anyone else wrote")
	f.IntVar(&fl.lockDays, "lock-days", 0, "repository: store every object of the backup with an S3 Object Lock retention of N days from its start, so that nobody (compliance) or nobody without the right to bypass it (governance) can delete it before; the bucket must have Object Lock enabled")
	f.StringVar(&fl.lockMode, "lock-mode", "governance", "with --lock-days: governance (who holds s3:BypassGovernanceRetention can still delete or shorten it, a way out of a mistake) or compliance (nobody can, not even the account's root user, until the date)")
	f.StringVar(&fl.compress, "compress", "", "zstd, lz4 or none (default zstd with --stream and --repo, none for a directory)")
	f.IntVar(&fl.level, "compress-level", 0, "compression level (zstd 1-22, lz4 1-9; default the fastest)")
	f.StringArrayVar(&fl.encryptTo, "encrypt-to", nil, "encrypt the stream or repository backup to this age public key (age1...; repeatable)")
	f.StringArrayVar(&fl.encryptFile, "encrypt-to-file", nil, "encrypt to the age public keys in this file (one per line), or to the public key of an identity file such as ferry keygen writes (repeatable)")
	f.Var(byteSize{&fl.maxMemory}, "max-memory", "memory for the stream or repository pipeline (blocks, parts, uploads)")
	f.Var(byteSize{&fl.partSize}, "part-size", fmt.Sprintf("repository: bytes of a file per stored part (default %s; small files are packed together)", sizeText(defaults.PartSize)))
	f.IntVar(&fl.uploads, "uploads", 0, fmt.Sprintf("repository: most objects uploading at once (default %d: ferry starts with 2 and adds one whenever parts wait for the link)", defaults.Uploads))
	f.IntVar(&cfg.Parallel, "parallel", defaults.BackupParallel, fmt.Sprintf("parallel copy workers: one reader of %s direct reads keeps a disk busy; raise it for an idle server or a fast array (--pace spares a busy server)", sizeText(defaults.ChunkSize)))
	f.Var(byteSize{&fl.chunk}, "chunk-size", fmt.Sprintf("bytes per data-file read and write (multiple of 64K; default %s for a directory, %s for a stream, a repository or an incremental, which write little or nothing to the server's disks): smaller keeps more of a busy server's write throughput, larger copies an idle one faster", sizeText(defaults.ChunkSize), sizeText(defaults.RemoteChunkSize)))
	f.Var(byteSize{&cfg.MaxRate}, "max-rate", "cap on data file reads, e.g. 100M (bytes/s; default unlimited)")
	f.StringVar(&fl.pace, "pace", "auto", "auto: copy at full speed while the server's writes hold, back off while they fall a quarter below their rate before the copy (an idle server's copy is never slowed); off: always full speed. --max-rate and --max-impact replace it")
	f.Float64Var(&fl.maxImpact, "max-impact", 0, "percent of the server's write throughput the backup may cost: the copy slows while writes fall further below their rate without it (measured in short pauses; default: not watched)")
	addSpoolFlags(f, &cfg.Spool)
	addRedoArchiveFlag(f, &cfg.RedoArchive)
	f.BoolVar(&cfg.KeepFreePages, "keep-free-pages", false, "copy the pages InnoDB marks free as they are, instead of storing them as zeros (holes in a directory)")
	f.BoolVar(&cfg.FullRedo, "full-redo", false, "keep the whole redo of the copy instead of copying changed pages again after a checkpoint (the three-stage copy, which a directory backup uses by default)")
	f.StringVar(&fl.incBasedir, "incremental-basedir", "", "take an incremental on this backup directory (ferry's or mariadb-backup's, full or incremental): only the pages changed since")
	f.Uint64Var(&fl.incLSN, "incremental-lsn", 0, "take an incremental holding the pages changed since this LSN (a base's to_lsn)")
	f.BoolVar(&fl.incRepo, "incremental", false, "repository: take an incremental on the newest complete backup of this server in the repository")
	f.StringVar(&fl.incBase, "base", "", "repository: take an incremental on this backup id")
	f.BoolVar(&fl.resume, "resume", false, "repository: continue the newest interrupted full backup of this host, keeping what it uploaded (its pages changed since are stored again) and copying the rest; it keeps its id")
	f.StringVar(&fl.databases, "databases", "", "partial backup: only these databases and database.table names ('db1 db2.t1'); the system schemas are always backed up")
	f.StringVar(&fl.tables, "tables", "", "partial backup: only the tables whose database.table matches this regular expression")
	f.StringVar(&fl.exclude, "exclude", "", "partial backup: leave out the tables whose database.table, or databases whose name, matches this regular expression")
	f.BoolVar(&cfg.Replica.Info, "slave-info", false, "the server is a replica: record its source and position (xtrabackup_slave_info, the manifest) so restore and clone can replicate from that source (--replicate-from-source); needs REPLICA MONITOR")
	f.BoolVar(&cfg.Replica.SafeSlave, "safe-slave-backup", false, "stop the replica's SQL thread from BLOCK_DDL to the end of BLOCK_COMMIT, once it has no temporary tables open")
	f.DurationVar(&cfg.Replica.SafeSlaveTimeout, "safe-slave-backup-timeout", defaults.SafeSlaveTimeout, "how long --safe-slave-backup waits for the replica to have no temporary tables open")
	f.StringVar(&cfg.Keys.KeyFile, "key-file", "", "a server encrypting its redo log: its file_key_management key file, if not readable where the server's settings say")
	f.StringVar(&cfg.Keys.PasswordFile, "key-password-file", "", "file holding the password --key-file is encrypted with (file_key_management_filekey)")
	return cmd
}

// apply checks the flag combination and fills cfg, its sink included (a repository is
// opened, nothing is created yet).
func (fl backupFlags) apply(cmd *cobra.Command, cfg *backup.Config) error {
	cfg.ChunkSize = int(fl.chunk)
	dests := 0
	for _, set := range []bool{fl.stream, fl.targetDir != "", fl.repo.url != ""} {
		if set {
			dests++
		}
	}
	encoded := fl.stream || fl.repo.url != ""
	switch {
	case dests > 1:
		return usageErr("give one of --target-dir, --stream or --repo")
	case dests == 0:
		return usageErr("--target-dir DIR, --stream or --repo REPO is required")
	case !encoded && (fl.compress != "" && fl.compress != "none" || len(fl.encryptTo)+len(fl.encryptFile) > 0):
		return usageErr("--compress and --encrypt-to apply to --stream and --repo; a directory backup is stored as mariadb-backup stores it")
	case fl.repo.url == "" && (fl.partSize != 0 || fl.uploads != 0 || fl.signWith != "" || fl.lockDays != 0 || fl.resume):
		return usageErr("--part-size, --uploads, --sign-with, --lock-days and --resume apply to --repo")
	case fl.resume && (fl.incRepo || fl.incBase != ""):
		return usageErr("--resume continues an interrupted full backup; an interrupted incremental is taken again with --incremental")
	case fl.lockDays < 0:
		return usagef("--lock-days %d: give a number of days, at least 1", fl.lockDays)
	case cmd.Flags().Changed("lock-mode") && fl.lockDays == 0:
		return usageErr("--lock-mode applies with --lock-days N")
	case fl.lockMode != "governance" && fl.lockMode != "compliance":
		return usagef("--lock-mode %q: give governance or compliance", fl.lockMode)
	case fl.maxImpact < 0 || fl.maxImpact >= 100:
		return usagef("--max-impact %v: give a percent between 0 and 100", fl.maxImpact)
	case fl.maxImpact > 0 && cfg.MaxRate > 0:
		return usageErr("--max-impact and --max-rate both pace the copy: choose one")
	case fl.pace != "auto" && fl.pace != "off":
		return usagef("--pace %q: give auto or off", fl.pace)
	}
	cfg.MaxImpact, cfg.Unpaced = fl.maxImpact/100, fl.pace == "off"
	filter, err := backup.NewFilter(fl.databases, fl.tables, fl.exclude)
	if err != nil {
		return err
	}
	cfg.Filter = filter
	if err := fl.applyIncremental(cfg); err != nil {
		return err
	}
	comp := fl.compress
	if comp == "" && encoded {
		comp = string(codec.Zstd)
	}
	c, err := codec.ParseCompression(comp)
	if err != nil {
		return fmt.Errorf("--compress: %w", err)
	}
	recipients, err := codec.Recipients(fl.encryptTo, fl.encryptFile)
	if err != nil {
		return err
	}
	pipe := stream.Options{Compression: c, Level: fl.level, Recipients: recipients,
		Workers: runtime.NumCPU(), MaxMemory: fl.maxMemory, OpenFiles: cfg.Parallel + 8}
	switch {
	case fl.stream:
		if term.IsTerminal(int(os.Stdout.Fd())) {
			return usageErr("--stream writes the backup to stdout, which is a terminal: redirect it to a file or pipe it to a command")
		}
		cfg.Sink, err = stream.NewSink(cmd.OutOrStdout(), pipe)
	case fl.repo.url != "":
		o := repo.WriterOptions{Pipeline: pipe, PartSize: fl.partSize, MaxMemory: fl.maxMemory, Uploads: fl.uploads,
			Version: version, Log: cfg.Log, LockFor: time.Duration(fl.lockDays) * 24 * time.Hour, LockMode: storage.LockMode(strings.ToUpper(fl.lockMode))}
		if fl.signWith != "" {
			if o.SignWith, err = signing.LoadSecret(fl.signWith); err != nil {
				return usagef("--sign-with: %w", err)
			}
		}
		if err = o.Check(); err != nil {
			return err
		}
		var r *repo.Repo
		if r, err = fl.repo.open(cmd.Context(), cfg.Log, true, version); err != nil {
			return err
		}
		if fl.lockDays > 0 { // refused before anything is copied or written
			if _, err = r.CanLock(cmd.Context()); err != nil {
				return err
			}
		}
		var sk *repo.Sink
		if sk, err = repo.NewSink(r, o); err != nil {
			return err
		}
		cfg.Sink = sk
		if fl.resume {
			e, err := r.Interrupted(cmd.Context())
			if err != nil {
				return err
			}
			sk.Resume(e)
		}
		if fl.incRepo || fl.incBase != "" {
			cfg.BaseFor = repoBase(r, sk, fl.incBase)
		}
	default:
		cfg.Sink, err = sink.NewDir(fl.targetDir)
	}
	return err
}

// reportResumed says what a resumed repository backup kept of its interrupted
// attempts and what it sent again.
func reportResumed(g *globals, s sink.Sink, res *backup.Result) {
	rs, ok := s.(*repo.Sink)
	if !ok {
		return
	}
	k := rs.Kept()
	if k.Objects == 0 {
		return
	}
	g.log.Info("resumed backup: the interrupted attempts' objects are kept, none was uploaded again", "id", res.Manifest.ID,
		"objects_kept", k.Objects, "stored_bytes_kept", k.Bytes, "stored_bytes_uploaded", res.Manifest.StoredSize()-k.Bytes,
		"tablespaces_kept", k.Files, "held_bytes_current", res.HeldKept, "held_bytes_sent_again", res.HeldPatched)
}

// addSpoolFlags adds the redo spool's place and bound.
func addSpoolFlags(f *pflag.FlagSet, o *backup.SpoolOptions) {
	f.StringVar(&o.Dir, "tmpdir", "", "where the redo copy spools while the destination is slower than the server's redo (default the system temp dir)")
	f.Var(byteSize{&o.Max}, "max-spool", "most redo the spool may hold, e.g. 20G (default nine tenths of the space free in --tmpdir)")
}

// addRedoArchiveFlag adds --redo-archive, for backup and serve.
func addRedoArchiveFlag(f *pflag.FlagSet, v *string) {
	f.StringVar(v, "redo-archive", backup.RedoArchiveAuto, "MySQL: copy the redo from the server's redo log archive, which the server keeps until it is read (auto: when innodb_redo_log_archive_dirs is set and the user has INNODB_REDO_LOG_ARCHIVE; off; or the label of the directory to use, required then)")
}

// applyIncremental checks the incremental flags and sets the base they name (a
// repository's base is chosen once the server is known: see repoBase).
func (fl backupFlags) applyIncremental(cfg *backup.Config) error {
	n := 0
	for _, set := range []bool{fl.incBasedir != "", fl.incLSN != 0, fl.incRepo, fl.incBase != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return usageErr("give one of --incremental-basedir, --incremental-lsn, --incremental or --base")
	case (fl.incRepo || fl.incBase != "") && fl.repo.url == "":
		return usageErr("--incremental and --base choose a base in the repository: they need --repo (for a directory give --incremental-basedir)")
	case (fl.incBasedir != "" || fl.incLSN != 0) && fl.repo.url != "":
		return usageErr("an incremental in a repository applies on a backup of that repository: give --incremental (the newest of this server) or --base ID, not --incremental-basedir or --incremental-lsn")
	case fl.incBasedir != "":
		b, err := backup.BaseFromDir(fl.incBasedir)
		cfg.Incremental = b
		return err
	case fl.incLSN != 0:
		cfg.Incremental = backup.BaseFromLSN(fl.incLSN)
	}
	return nil
}

// repoBase chooses the base of a repository incremental: the backup id, or the newest
// complete backup of the server being backed up; the sink's in-progress marker names it.
func repoBase(r *repo.Repo, sk *repo.Sink, id string) func(ctx context.Context, serverUID string) (*backup.Base, error) {
	return func(ctx context.Context, serverUID string) (*backup.Base, error) {
		var m *manifest.Manifest
		var err error
		if id != "" {
			m, err = r.Manifest(ctx, id)
		} else {
			m, err = r.NewestBase(ctx, serverUID)
		}
		if err != nil {
			return nil, err
		}
		sk.SetBase(m.ID)
		return backup.BaseFromManifest(m, r.Location()+" "+m.ID)
	}
}
