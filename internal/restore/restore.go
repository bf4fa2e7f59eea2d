package restore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/galera"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Config configures ferry restore.
type Config struct {
	// Source is where the backup is read from (DirSource, StreamSource, RepoSource,
	// ChainSource, a clone).
	Source   Source
	Datadir  string
	Replace  bool          // move a non-empty datadir aside (never deleted) and restore in its place
	Owner    string        // user[:group] for the restored files; default: see resolveOwner (the mysql user for a new datadir)
	DataDirs DataDirs      // where DATA DIRECTORY tablespaces go
	Keys     keyfile.Files // this host's key files, for a backup encrypted at rest
	Mariadbd string
	// UseMemory is the memory for recovery ("": 256M): the native apply's bytes of redo
	// records per batch, or the buffer pool of the stock server's recovery.
	UseMemory string
	// Recovery says how the redo is applied: natively (the default, falling back to the
	// server's recovery when ferry cannot), natively only, or by the server.
	Recovery Recovery
	// InPlace, if set, swaps the datadir's contents and keeps the directory (a Galera
	// joiner's); the old contents are kept aside as with Replace.
	InPlace *InPlace
	// BeforeSwap, if set, is called with the backup's coordinates once the copy is
	// complete and prepared, before it replaces the datadir: an error stops the restore
	// there, the datadir untouched.
	BeforeSwap func(mariadb.Coordinates) error
	// Replay, if set, applies archived binlog events to the prepared copy before it is
	// swapped in (a point-in-time restore).
	Replay *Replay
	// Galera writes grastate.dat at the backup's Galera position, so that a node
	// started on the restored datadir joins its cluster by IST while a donor's gcache
	// still holds the write-sets since.
	Galera bool
	// FromSource refuses a backup that does not record the source its server
	// replicated from (backup --slave-info): the restored server is to replicate from
	// that source, not from the backed-up replica (--replicate-from-source).
	FromSource bool
	// Export, if set, makes this a table restore: it is called with a private server
	// running on the prepared copy (after any Replay) and the copy's directory; the
	// copy is then removed, never swapped in, and Datadir is never created.
	Export func(ctx context.Context, db *sql.DB, copyDir string) error
	// Want, if set, names the files of the backup the restore needs (a table
	// restore: the system tablespaces and the tables'); a source that can pick files
	// restores only those, and recovery skips the redo of the missing tablespaces.
	Want func(path string) bool
	// Recoverer, if set, recovers the copy instead of the stock server and native
	// apply (a test's).
	Recoverer Recoverer
	Log       *slog.Logger
	Progress  io.Writer
	Terminal  bool

	// Starter, if set, starts the private server of the replay and the export instead
	// of the stock server (a test's).
	Starter Starter
	// RunDir, if set, holds the directories of the private servers of the replay and
	// the export (socket, pid file, error log; a path short enough for a socket), each
	// removed when its server stops; "" is the system's temporary directory.
	RunDir string
	// Discard removes a failed restore's copy even from a source that could resume
	// it: a restore drill's copy is scratch, never continued.
	Discard bool
}

// runDir makes a new directory for a private server's socket, pid file and log.
func (cfg Config) runDir(prefix string) (string, error) {
	return os.MkdirTemp(cfg.RunDir, prefix)
}

// Result tells what a restore did.
type Result struct {
	Backup      *Backup
	Datadir     string
	MovedAside  string // old datadir kept here with --replace
	Coordinates mariadb.Coordinates
	Options     ServerOptions // what the restored server must be started with
	Owner       string        // run as root: who owns the files and why, e.g. "mysql:mysql (the mysql user)"
}

// Restore fills a staging directory beside the datadir from the source, verifying
// every checksum, prepares the staging copy if needed, sets ownership, and renames it
// into place at the end. The source is left untouched unless it consumes itself (a
// directory restored with Move).
func Restore(ctx context.Context, cfg Config) (*Result, error) {
	r, err := start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	staging, err := cfg.Source.Staging(r.datadir)
	if err != nil {
		return nil, err
	}
	r.staging = staging
	res, err := r.restoreIn(ctx)
	if errors.As(err, new(swappedError)) { // the copy is in place: nothing to settle
		return nil, err
	}
	if err != nil {
		return nil, settle(cfg, staging, err)
	}
	if r.caps.Consume {
		if err := cfg.Source.(Consuming).Finished(staging, r.datadir); err != nil {
			cfg.Log.Warn("the restore is complete, but its backup's marker was not updated", "err", err)
		}
	}
	return res, nil
}

// run is one restore: what is known of it before the staging copy is filled.
type run struct {
	cfg              Config
	caps             Caps
	rec              Recoverer
	datadir, staging string
	owner            ownerIDs
	pre              *Backup // the backup as Inspect told it (nil: Caps().Inspect is not set)
	bin              string  // the mariadbd that recovers the copy, if it is known to need one
}

// start checks everything a restore can check before any data moves: the settings,
// the datadir, the backup as the source tells it (or, for a source that tells nothing
// before its data, that a server is there to recover it) and the free space.
func start(ctx context.Context, cfg Config) (*run, error) {
	datadir, err := filepath.Abs(cfg.Datadir)
	if err != nil || cfg.Datadir == "" {
		return nil, setting.Errorf("%s is required", setting.Datadir)
	}
	if _, err := applyMemory(cfg.UseMemory); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, caps: cfg.Source.Caps(), rec: cfg.recoverer(), datadir: datadir}
	if r.caps.Moves && (cfg.Export != nil || cfg.Want != nil) {
		return nil, errors.New("a table restore cannot move the backup's files: its copy is removed once the tables are imported, and the backup would go with it; copy them instead")
	}
	if err := checkDatadir(datadir, cfg.Replace || cfg.InPlace != nil); err != nil {
		return nil, err
	}
	if r.caps.Inspect {
		if r.pre, err = cfg.Source.Inspect(ctx); err != nil {
			return nil, err
		}
		r.bin, err = checkBefore(ctx, r.pre, cfg, r.rec)
	} else {
		_, err = r.rec.Server(ctx, nil) // its version is checked once the backup says which it needs
	}
	if err != nil {
		return nil, err
	}
	if r.owner, err = resolveOwner(cfg.Owner, datadir); err != nil {
		return nil, err
	}
	removeStale(datadir, cfg.Log)
	if r.caps.Inspect {
		if err := checkSpace(cfg.Source, r.pre, datadir, cfg.Want); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// settle ends a failed restore so that nothing is lost: a consuming source decides
// (files put back, or staging kept for --resume), a source that can resume
// keeps staging, and any other staging copy is removed (the source still holds it all).
// The error says which, and where the data is.
func settle(cfg Config, staging string, err error) error {
	caps := cfg.Source.Caps()
	if caps.Consume {
		return cfg.Source.(Consuming).Settle(staging, err)
	}
	if caps.Resume && !cfg.Discard {
		return setting.Errorf("%w; the partial restore is kept in %s: run the same command with %s to continue it", err, staging, setting.Resume)
	}
	if rerr := os.RemoveAll(staging); rerr != nil {
		return fmt.Errorf("%w; the staging directory %s could not be removed (%v): remove it", err, staging, rerr)
	}
	return fmt.Errorf("%w; the partial copy was removed and the datadir left as it was: run the restore again", err)
}

// checkBefore checks what the backup needs of this host before any data moves: free
// DATA DIRECTORY paths, usable server options, and a mariadbd of its series (returned)
// if it is not prepared yet.
func checkBefore(ctx context.Context, b *Backup, cfg Config, rec Recoverer) (string, error) {
	if b.isIncremental() && b.Chain == 0 {
		return "", setting.Errorf("%s is an incremental backup: restore it on its base, e.g. %s FULL %s %s (with every incremental between, oldest first)", b.Origin(), setting.TargetDir, setting.IncrementalDir, b.Origin())
	}
	if err := b.checkDataDirs(cfg.DataDirs); err != nil {
		return "", err
	}
	if cfg.Galera && b.coordinates().Galera == nil {
		return "", setting.Errorf("%s: the backup %s has no Galera position (no xtrabackup_galera_info): it was not taken on a Galera node", setting.Galera, b.Origin())
	}
	if cfg.FromSource {
		if err := CheckSource(b.coordinates()); err != nil {
			return "", setting.Errorf("%s: %s %w", setting.ReplicateFromSource, b.Origin(), err)
		}
	}
	if _, err := b.Options(cfg.Keys); err != nil {
		return "", err
	}
	if b.Prepared {
		return "", nil
	}
	return rec.Server(ctx, b)
}

// CheckSource tells whether c says which one source a replica of the backed-up
// replica's source starts from, and where.
func CheckSource(c mariadb.Coordinates) error {
	switch {
	case len(c.Sources) == 0:
		return setting.Errorf("does not record a replication source: take it from the replica with ferry backup %s", setting.SlaveInfo)
	case len(c.Sources) > 1:
		return fmt.Errorf("records %d replication sources (multi-source): set the connections up by hand from xtrabackup_slave_info", len(c.Sources))
	case c.GTIDSlavePos == "":
		return errors.New("records no gtid_slave_pos: set the replica up by hand from xtrabackup_slave_info (file and position)")
	}
	return nil
}

// restoreIn fills staging from the source, prepares it, and either hands it to a
// table export or renames it into place.
func (r *run) restoreIn(ctx context.Context) (*Result, error) {
	ahead, feed := r.parseLog(ctx)
	if ahead != nil {
		defer ahead.Close()
	}
	b, err := r.fill(ctx, feed)
	if err != nil {
		return nil, err
	}
	if err := r.prepare(ctx, b, ahead); err != nil {
		return nil, err
	}
	coords := b.coordinates()
	if r.cfg.Replay != nil {
		if coords, err = r.replay(ctx, b); err != nil {
			return nil, err
		}
	}
	if r.cfg.Export != nil {
		return r.export(ctx, b, coords)
	}
	return r.swap(b, coords)
}

// parseLog starts parsing the backup's redo log while the copy is filled: where the
// backup Inspect told has it (a directory), or as the source writes it into staging
// (Caps().FollowLog); neither when the copy cannot be parsed ahead.
func (r *run) parseLog(ctx context.Context) (*apply.Ahead, *apply.Feed) {
	if ahead := parseAhead(ctx, r.pre, r.cfg); ahead != nil {
		return ahead, nil
	}
	if r.caps.FollowLog {
		return followAhead(ctx, r.staging, r.cfg)
	}
	return nil, nil
}

// fill fills staging from the source and checks the backup it holds; a backup the
// source could not tell before its data is checked here as Inspect's would have been.
func (r *run) fill(ctx context.Context, feed *apply.Feed) (*Backup, error) {
	b, err := r.cfg.Source.Fill(ctx, r.staging, r.env())
	if feed != nil {
		feed.Fail(errLogNotFilled) // a no-op once the log is complete
	}
	if err != nil {
		return nil, err
	}
	if b.isIncremental() && b.Chain == 0 {
		return nil, setting.Errorf("%s is an incremental backup: restore it on its base, e.g. %s FULL %s %s (with every incremental between, oldest first)", b.Origin(), setting.TargetDir, setting.IncrementalDir, b.Origin())
	}
	if b.ForeignPrepared {
		r.cfg.Log.Warn("backup was prepared by another tool: its files changed since ferry wrote the manifest and cannot be checked against it", "from", b.Origin())
	}
	if !r.caps.Inspect {
		if r.bin, err = checkBefore(ctx, b, r.cfg, r.rec); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// env is what the source may use while it fills staging.
func (r *run) env() Env {
	cfg := r.cfg
	env := Env{Log: cfg.Log, Progress: cfg.Progress, Terminal: cfg.Terminal, Want: cfg.Want}
	env.RecoverBase = func(ctx context.Context, b *Backup, dir string) error {
		bin, err := r.rec.Server(ctx, b)
		if err != nil {
			return err
		}
		return r.rec.Recover(ctx, RecoverJob{Backup: b, Dir: dir, ErrLog: errLogBeside(r.datadir), Bin: bin, Force: 3})
	}
	return env
}

// prepare recovers the filled copy unless the backup was prepared, telling a
// consuming source first when the copy is about to differ from the backup's files.
func (r *run) prepare(ctx context.Context, b *Backup, ahead *apply.Ahead) error {
	cfg := r.cfg
	if !b.Prepared || cfg.Replay != nil || cfg.Export != nil {
		if err := phase(cfg.Source, r.staging, phaseRecovering); err != nil {
			return err
		}
	}
	if b.Prepared {
		return nil
	}
	job := RecoverJob{Backup: b, Dir: r.staging, ErrLog: placeFor(r.datadir).path("prepare.err"), Bin: r.bin, Ahead: ahead}
	if cfg.Want != nil || b.Partial {
		job.Force = 1
		cfg.Log.Info("prepare: the copy holds only some tables: recovery leaves the others out")
	}
	if err := r.rec.Recover(ctx, job); err != nil {
		return err
	}
	if cfg.Want != nil {
		return checkRebuilt(r.staging, cfg.Want)
	}
	return nil
}

// replay applies the archived binlog to the prepared copy and returns the
// coordinates it reached.
func (r *run) replay(ctx context.Context, b *Backup) (mariadb.Coordinates, error) {
	if r.bin == "" {
		var err error
		if r.bin, err = r.rec.Server(ctx, b); err != nil {
			return mariadb.Coordinates{}, err
		}
	}
	return replay(ctx, b, r.staging, r.bin, r.cfg)
}

// export hands the prepared copy to the table export, then removes it.
func (r *run) export(ctx context.Context, b *Backup, coords mariadb.Coordinates) (*Result, error) {
	if err := export(ctx, b, r.staging, r.bin, r.cfg); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(r.staging); err != nil {
		r.cfg.Log.Warn("the prepared copy was not removed", "dir", r.staging, "err", err)
	}
	return &Result{Backup: b, Coordinates: coords}, nil
}

// swap readies the prepared copy for the datadir (the backup's own files out,
// grastate.dat in for Galera, the caller's last check) and renames it into place.
func (r *run) swap(b *Backup, coords mariadb.Coordinates) (*Result, error) {
	cfg := r.cfg
	if err := removeBackupOnlyFiles(r.staging); err != nil {
		return nil, err
	}
	if cfg.Galera {
		if err := writeGaleraState(r.staging, coords, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.BeforeSwap != nil {
		if err := cfg.BeforeSwap(coords); err != nil {
			return nil, err
		}
	}
	return finishStaging(b, coords, r.staging, r.datadir, r.owner, cfg)
}

// finishStaging sets ownership, makes the staging dir durable, puts DATA DIRECTORY
// tablespaces where they go and renames the staging dir in.
func finishStaging(b *Backup, c mariadb.Coordinates, staging, datadir string, owner ownerIDs, cfg Config) (*Result, error) {
	opts, err := b.Options(cfg.Keys)
	if err != nil {
		return nil, err
	}
	if err := owner.apply(staging); err != nil {
		return nil, err
	}
	moved, err := placeRemote(staging, cfg.DataDirs, owner)
	if err != nil {
		return nil, err
	}
	if err := filecopy.SyncFS(staging); err != nil {
		unplace(moved)
		return nil, err
	}
	var local func(string) bool
	if cfg.InPlace != nil {
		local = cfg.InPlace.Local
	}
	if err := phase(cfg.Source, staging, phaseSwapping); err != nil {
		unplace(moved)
		return nil, err
	}
	aside, err := swapIn(staging, datadir, cfg.Replace || cfg.InPlace != nil, local)
	if errors.As(err, new(swappedError)) {
		if aside != "" {
			err = fmt.Errorf("%w (the restored copy is in %s; the old datadir's files are in %s)", err, datadir, aside)
		}
		return nil, err
	}
	if err != nil { // nothing moved: the copy is whole in staging again
		unplace(moved)
		if perr := phase(cfg.Source, staging, phaseUnswapped); perr != nil {
			return nil, errors.Join(err, perr)
		}
		return nil, err
	}
	if err := owner.chown(datadir); err != nil { // an existing datadir keeps its directory
		cfg.Log.Warn("the restored datadir's own directory keeps its owner", "datadir", datadir, "err", err)
	}
	return &Result{Backup: b, Datadir: datadir, MovedAside: aside, Coordinates: c, Options: opts, Owner: owner.String()}, nil
}

// writeGaleraState writes grastate.dat at the backup's Galera position.
func writeGaleraState(staging string, c mariadb.Coordinates, cfg Config) error {
	if c.Galera == nil {
		return setting.Errorf("%s: the backup has no Galera position (no xtrabackup_galera_info): it was not taken on a Galera node", setting.Galera)
	}
	if err := galera.WriteState(staging, *c.Galera); err != nil {
		return err
	}
	cfg.Log.Info("wrote grastate.dat: a node started on this datadir asks its cluster for the write-sets since the backup (IST)", "position", c.Galera.String())
	return nil
}

// checkDatadir refuses a datadir with contents unless replace is set, and a datadir a
// running server holds in any case. A mount point's lost+found and what ferry keeps
// there are not contents.
func checkDatadir(datadir string, replace bool) error {
	ents, err := contents(datadir)
	if err != nil || len(ents) == 0 {
		return err
	}
	if !replace {
		return setting.Errorf("datadir %s is not empty: restore into a new or empty directory, or pass %s to move the existing datadir's files aside (they are kept, never deleted)", datadir, setting.Replace)
	}
	if mariadb.DatadirInUse(datadir) {
		return fmt.Errorf("datadir %s is in use by a running server: stop it before restoring over it", datadir)
	}
	return nil
}

// StagingPath is the path of ferry's working directory called name (e.g. "clone") for a
// restore into datadir: beside it on its filesystem, or inside it when it is a mount
// point (see staging.go). The caller creates it.
func StagingPath(datadir, name string) string { return placeFor(datadir).path(name) }

// NewStaging creates a new staging directory for datadir on its filesystem (dir, if
// given, which must not exist; default a new one named after this process), for a
// Source's Staging; a failed restore removes it unless the source keeps it.
func NewStaging(datadir, dir string) (string, error) { return makeStaging(datadir, dir) }

// makeStaging creates a new staging directory for datadir on its filesystem (want, if
// given); see staging.go.
func makeStaging(datadir, want string) (string, error) {
	if want != "" {
		if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
			return "", fmt.Errorf("create %s: %w", filepath.Dir(want), filecopy.WrapWriteErr(err))
		}
		if err := os.Mkdir(want, 0o750); err != nil {
			return "", fmt.Errorf("create staging directory: %w", filecopy.WrapWriteErr(err))
		}
		return want, nil
	}
	dir := placeFor(datadir).path(fmt.Sprintf("staging-%d", os.Getpid()))
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(dir), filecopy.WrapWriteErr(err))
	}
	if err := os.Mkdir(dir, 0o750); err != nil {
		return "", fmt.Errorf("create a staging directory for %s: %w", datadir, filecopy.WrapWriteErr(err))
	}
	return dir, nil
}

// swapIn puts the staging copy in place. A datadir that does not exist is the staging
// directory renamed; an existing one keeps its directory (a mount point cannot be
// renamed) and swaps its contents: with replace, the old contents move aside (kept,
// never deleted; returned); without, the datadir must still have none. The entries
// local names stay in the datadir.
func swapIn(staging, datadir string, replace bool, local func(string) bool) (string, error) {
	if _, err := os.Stat(datadir); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(staging, datadir); err != nil {
			return "", fmt.Errorf("rename %s to %s: %w", staging, datadir, err)
		}
		if err := manifest.SyncDir(filepath.Dir(datadir)); err != nil {
			return "", swappedError{err}
		}
		return "", nil
	}
	if !replace {
		if ents, err := contents(datadir); err != nil || len(ents) > 0 {
			return "", setting.Errorf("datadir %s became non-empty during the restore; it was left as it is: restore again into an empty directory, or pass %s", datadir, setting.Replace)
		}
	}
	return swapContents(staging, datadir, placeFor(datadir).asidePath(time.Now().Format("20060102T150405")), local)
}
