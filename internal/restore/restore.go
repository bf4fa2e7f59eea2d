package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/stream"
)

// Config configures ferry restore.
type Config struct {
	BackupDir string
	// Stream, when set, is read instead of BackupDir: an xbstream made by ferry backup
	// --stream or mariadb-backup --stream=xbstream. StreamName names it in messages.
	Stream     io.Reader
	StreamName string
	// Repo, when set, is read instead: backup BackupID (an id or "latest"); Resume
	// continues a restore of it that was interrupted.
	// Fill, when set, is the source instead: it writes a backup into the (new, empty)
	// staging directory and says what it wrote (a clone's receiver). FillName names it.
	Fill     func(ctx context.Context, staging string) (*stream.Unpacked, error)
	FillName string
	// Staging, if set, is the staging directory to create (it must not exist);
	// default a new temporary one beside the datadir.
	Staging    string
	Repo       *repo.Repo
	BackupID   string
	Resume     bool
	Identities []age.Identity // for encrypted streams and repositories
	MaxMemory  int64          // stream data buffered between the reader and the writers
	Datadir    string
	Move       bool          // move files out of the backup instead of copying (consumes the backup)
	Replace    bool          // move a non-empty datadir aside (never deleted) and restore in its place
	Owner      string        // user[:group] for the restored files; default the datadir's (or its parent's) owner
	DataDirs   DataDirs      // where DATA DIRECTORY tablespaces go
	Keys       keyfile.Files // this host's key files, for a backup encrypted at rest
	Parallel   int
	Mariadbd   string
	UseMemory  string
	Log        *slog.Logger
	Progress   io.Writer
	Terminal   bool
}

// Result tells what a restore did.
type Result struct {
	Backup      *Backup
	Datadir     string
	MovedAside  string // old datadir kept here with --replace
	Coordinates mariadb.Coordinates
	Options     ServerOptions // what the restored server must be started with
}

// Restore copies (or moves) a backup into a staging directory beside the datadir,
// verifying every checksum, prepares the staging copy if needed, sets ownership, and
// renames it into place at the end. The backup is left untouched unless Move is set.
func Restore(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.NumCPU()
		if cfg.Repo != nil {
			cfg.Parallel = 8 // downloads wait on the network, not the cores
		}
	}
	datadir, err := filepath.Abs(cfg.Datadir)
	if err != nil || cfg.Datadir == "" {
		return nil, errors.New("--datadir is required")
	}
	if err := checkDatadir(datadir, cfg.Replace); err != nil {
		return nil, err
	}
	if cfg.Repo != nil {
		return restoreRepo(ctx, cfg, datadir)
	}
	if cfg.Stream != nil || cfg.Fill != nil {
		return restoreStream(ctx, cfg, datadir)
	}
	b, err := Open(cfg.BackupDir)
	if err != nil {
		return nil, err
	}
	if err := checkLinks(b.Dir, cfg.DataDirs); err != nil {
		return nil, err
	}
	if _, err := b.Options(cfg.Keys); err != nil {
		return nil, err
	}
	bin := ""
	if !b.Prepared {
		if bin, _, err = b.prepareMariadbd(ctx, cfg.Mariadbd); err != nil {
			return nil, err
		}
	}
	return inStaging(cfg, datadir, func(staging string, owner ownerIDs) (*Result, error) {
		return restoreInto(ctx, cfg, b, staging, bin, owner, datadir)
	})
}

// inStaging creates a staging directory beside datadir and runs fill in it; on failure
// the staging directory is removed, so the datadir is never left half-restored.
func inStaging(cfg Config, datadir string, fill func(staging string, owner ownerIDs) (*Result, error)) (*Result, error) {
	owner, err := resolveOwner(cfg.Owner, datadir)
	if err != nil {
		return nil, err
	}
	staging, err := makeStaging(datadir, cfg.Staging)
	if err != nil {
		return nil, err
	}
	res, err := fill(staging, owner)
	if err != nil {
		os.RemoveAll(staging)
		return nil, err
	}
	return res, nil
}

func restoreInto(ctx context.Context, cfg Config, b *Backup, staging, bin string, owner ownerIDs, datadir string) (*Result, error) {
	if b.ForeignPrepared {
		cfg.Log.Warn("backup was prepared by another tool: its files changed since ferry wrote the manifest and cannot be checked against it", "dir", b.Dir)
	}
	files, err := b.datadirFiles()
	if err != nil {
		return nil, err
	}
	prog := progress.New(progress.Options{Label: "restore", Total: totalSize(files), Terminal: cfg.Terminal, Out: cfg.Progress, Log: cfg.Log})
	err = copyFiles(ctx, b.Dir, staging, files, cfg.Parallel, cfg.Move, prog)
	prog.Finish()
	if err != nil {
		return nil, err
	}
	if !b.Prepared {
		if err := recoverDir(ctx, b, staging, errLogBeside(datadir), bin, cfg.UseMemory, cfg.Keys, cfg.Log); err != nil {
			return nil, err
		}
	}
	return finishStaging(b, b.coordinates(), staging, datadir, owner, cfg)
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
	aside, err := swapIn(staging, datadir, cfg.Replace)
	if err != nil {
		unplace(moved)
		return nil, err
	}
	return &Result{Backup: b, Datadir: datadir, MovedAside: aside, Coordinates: c, Options: opts}, nil
}

// checkDatadir refuses a non-empty datadir unless replace is set, and a datadir a
// running server holds in any case.
func checkDatadir(datadir string, replace bool) error {
	ents, err := os.ReadDir(datadir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("datadir %s: %w", datadir, err)
	}
	if len(ents) == 0 {
		return nil
	}
	if !replace {
		return fmt.Errorf("datadir %s is not empty: restore into a new or empty directory, or pass --replace to move the existing datadir aside (it is kept, never deleted)", datadir)
	}
	if inUse(datadir) {
		return fmt.Errorf("datadir %s is in use by a running server: stop it before restoring over it", datadir)
	}
	return nil
}

// makeStaging creates a new staging directory beside datadir (same filesystem, so the
// final rename is atomic).
func makeStaging(datadir, want string) (string, error) {
	parent := filepath.Dir(datadir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", parent, err)
	}
	if want != "" {
		if err := os.Mkdir(want, 0o750); err != nil {
			return "", fmt.Errorf("create staging directory: %w", err)
		}
		return want, nil
	}
	dir, err := os.MkdirTemp(parent, "."+filepath.Base(datadir)+".ferry-staging-")
	if err != nil {
		return "", fmt.Errorf("create staging directory beside %s: %w", datadir, err)
	}
	return dir, os.Chmod(dir, 0o750)
}

// swapIn renames staging to datadir; an existing datadir is removed if empty or, with
// replace, renamed aside.
func swapIn(staging, datadir string, replace bool) (string, error) {
	aside := ""
	if fi, err := os.Stat(datadir); err == nil {
		os.Chmod(staging, fi.Mode().Perm())
		if err := os.Remove(datadir); err != nil {
			if !replace {
				return "", fmt.Errorf("datadir %s became non-empty during the restore; it was left as it is: restore again into an empty directory", datadir)
			}
			aside = fmt.Sprintf("%s.ferry-old-%s", datadir, time.Now().Format("20060102T150405"))
			if err := os.Rename(datadir, aside); err != nil {
				return "", fmt.Errorf("move old datadir aside: %w", err)
			}
		}
	}
	if err := os.Rename(staging, datadir); err != nil {
		return "", fmt.Errorf("rename %s to %s: %w", staging, datadir, err)
	}
	return aside, manifest.SyncDir(filepath.Dir(datadir))
}
