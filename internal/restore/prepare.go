package restore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// PrepareConfig configures ferry prepare.
type PrepareConfig struct {
	Dir       string
	Mariadbd  string   // explicit binary; default found on PATH
	UseMemory string   // memory for recovery, default 256M (Config.UseMemory)
	Recovery  Recovery // native apply (with or without fallback) or the server's recovery
	Keys      keyfile.Files
	// Recoverer, if set, recovers the backup instead of the stock server and native
	// apply (a test's).
	Recoverer Preparer
	Log       *slog.Logger
}

// stockPrepareIncremental is mariadb-backup's command that applies an incremental (its
// directory follows): another program's options, not ferry's.
const stockPrepareIncremental = "mariadb-backup --prepare --target-dir FULL --incremental-dir "

// Prepare runs crash recovery on a backup directory in place and marks it prepared.
// A prepared backup is left alone, so running it twice is harmless.
func Prepare(ctx context.Context, cfg PrepareConfig) error {
	if _, err := applyMemory(cfg.UseMemory); err != nil {
		return err
	}
	b, err := Open(cfg.Dir)
	if err != nil {
		return err
	}
	if b.isIncremental() {
		return setting.Errorf("%s is an incremental backup: ferry restore %s FULL %s %s applies it and recovers once (or prepare it with %s%s)", cfg.Dir, setting.TargetDir, setting.IncrementalDir, cfg.Dir, stockPrepareIncremental, cfg.Dir)
	}
	if b.Prepared {
		cfg.Log.Info("backup is already prepared; nothing to do", "dir", cfg.Dir)
		return nil
	}
	rec := cfg.recoverer()
	bin, err := rec.Server(ctx, b)
	if err != nil {
		return err
	}
	version, err := rec.Version(ctx, bin)
	if err != nil {
		return err
	}
	// Files the recovery does not touch keep their checksum; the margin covers coarse
	// file timestamps.
	since := time.Now().Add(-2 * time.Second)
	if err := rec.Recover(ctx, RecoverJob{Backup: b, Dir: cfg.Dir, ErrLog: errLogBeside(cfg.Dir), Bin: bin}); err != nil {
		return err
	}
	return b.markPrepared(version, since)
}

// errLogBeside names the error log of a recovery of dir (a backup directory, or the
// datadir a restore builds): a hidden file beside it, kept when recovery fails so the
// message can point at it, and removed by the next recovery or when it succeeds.
func errLogBeside(dir string) string {
	abs, _ := filepath.Abs(dir)
	return filepath.Join(filepath.Dir(abs), "."+filepath.Base(abs)+".ferry-prepare.err")
}

// recovery is one recovery of a copy in dir: it applies the redo natively unless mode
// says otherwise, or starts the stock mariadbd on dir, lets InnoDB (and Aria) recovery
// run and recovered transactions roll back, and shuts it down cleanly. Native apply
// never rolls back: the transactions open at the backup's end roll back when the
// restored server starts.
type recovery struct {
	b        *Backup
	dir      string
	errLog   string // the server's error log, kept if its recovery fails
	bin, mem string // the mariadbd and its buffer pool (default 256M)
	mode     Recovery
	keys     keyfile.Files
	log      *slog.Logger
	// force is innodb_force_recovery: 0; 1 for a copy that holds only some of the
	// backup's tablespaces (a table restore), whose recovery skips the redo of the
	// missing ones instead of refusing to start; 3 keeps the transactions open in the
	// copy open (and purge from running), so that a later link of an incremental chain,
	// in which they may have committed, applies on the copy.
	force int
	ahead *apply.Ahead // the log parsed while the copy was filled (nil: none)
}

// run runs the recovery.
func (r recovery) run(ctx context.Context) error {
	b, dir, errLog, bin, mem, mode, keys, log, force := r.b, r.dir, r.errLog, r.bin, r.mem, r.mode, r.keys, r.log, r.force
	keepOpen := force == 3
	if mem == "" {
		mem = "256M"
	}
	run, err := os.MkdirTemp("", "ferry-prep-")
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer os.RemoveAll(run)
	abs, _ := filepath.Abs(dir)
	opts, logSize, err := readyForRecovery(b, abs, keys, log)
	if err != nil {
		return err
	}
	faultpoint.At(ctx, "recovery", 1)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	memory, err := applyMemory(r.mem)
	if err != nil {
		return err
	}
	if done, err := applyNative(ctx, abs, opts, mode, force == 1, r.ahead, memory, log); done || err != nil {
		return err
	}
	args := append(opts.Args(), "--innodb-buffer-pool-size="+mem, fmt.Sprintf("--innodb-log-file-size=%d", logSize))
	if force > 0 {
		args = append(args, fmt.Sprintf("--innodb-force-recovery=%d", force))
	}
	if force == 1 {
		made, err := placeholdCreated(abs, opts)
		defer func() {
			if rerr := removePlaceholders(made); rerr != nil {
				log.Warn("the placeholder tablespaces of the recovery were not all removed", "dir", abs, "err", rerr)
			}
		}()
		if err != nil {
			return err
		}
		if n := countSuffix(made, ".ibd"); n > 0 {
			log.Info("prepare: the copy lacks tablespaces the redo creates: recovery builds them in placeholders, removed after it", "placeholders", n)
		}
	}
	t0 := time.Now()
	log.Info("prepare: running crash recovery with the stock server", "mariadbd", bin, "dir", abs)
	if err := os.Remove(errLog); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("prepare: remove the error log of an earlier run: %w", err)
	}
	pc := mariadb.PrivateConfig{Binary: bin, Datadir: abs, RunDir: run, Args: args, ErrLog: errLog}
	if err := recoverChecked(ctx, pc, dir, opts, keys, log, keepOpen); err != nil {
		if ctx.Err() != nil {
			os.Remove(errLog) // interrupted, not failed: the log tells nothing
		}
		return err
	}
	os.Remove(filepath.Join(abs, "ibtmp1"))
	os.Remove(errLog)
	log.Info("prepare: recovery finished", "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// readyForRecovery applies the DDL markers, pads the redo log, takes the server
// options the backup may give (warning about the rest) and localizes the redo's
// DATA DIRECTORY names. It returns the options and the redo log's size.
func readyForRecovery(b *Backup, abs string, keys keyfile.Files, log *slog.Logger) (ServerOptions, int64, error) {
	if err := applyDDLMarkers(abs); err != nil {
		return ServerOptions{}, 0, err
	}
	logSize, err := padRedo(abs)
	if err != nil {
		return ServerOptions{}, 0, err
	}
	opts, err := b.Options(keys)
	if err != nil {
		return opts, 0, err
	}
	if len(opts.Ignored) > 0 {
		log.Warn("prepare: the backup carries server settings that recovery does not take from a backup; they are ignored", "settings", strings.Join(opts.Ignored, ","))
	}
	n, err := localizeRedo(abs, opts)
	if err != nil {
		return opts, 0, err
	}
	if n > 0 {
		log.Info("prepare: DATA DIRECTORY tablespaces are recovered from their copies in the backup", "redo_names_localized", n)
	}
	return opts, logSize, nil
}

// recoverChecked runs recovery with the links set aside and, for a backup encrypted
// at rest, checks the key file on a second start: recovery reads only the pages the
// redo touches, and those it builds from the redo it does not decrypt.
func recoverChecked(ctx context.Context, pc mariadb.PrivateConfig, dir string, opts ServerOptions, keys keyfile.Files, log *slog.Logger, keepOpen bool) error {
	err := withLinksAside(pc.Datadir, func() error {
		if err := runRecovery(ctx, pc, dir, nil, keepOpen); err != nil || !opts.Encrypted() || keepOpen {
			return err
		}
		return runRecovery(ctx, pc, dir, func(db *sql.DB) error { return checkKeys(ctx, db, keys.KeyFile, log) }, false)
	})
	var ke keyError
	switch {
	case errors.As(err, &ke):
		os.Remove(pc.ErrLog) // recovery worked: its log tells nothing about the key
		return ke.error
	case err != nil && opts.Encrypted():
		return setting.Errorf("recovery with the %s keys of %s %s failed; if it says it cannot decrypt or finds no key, that is not the source's key file (or %s is wrong): %w", mariadb.FileKeyManagement, setting.KeyFile, keys.KeyFile, setting.KeyPasswordFile, err)
	}
	return err
}

// keyError is a key file that does not decrypt the backup (recovery itself worked).
type keyError struct{ error }

// runRecovery starts the private server, waits for the rollback of recovered
// transactions, runs check (if set) on it, and shuts it down cleanly.
func runRecovery(ctx context.Context, cfg mariadb.PrivateConfig, dir string, check func(*sql.DB) error, keepOpen bool) error {
	p, err := mariadb.StartPrivate(ctx, cfg)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", dir, err)
	}
	if keepOpen {
		return p.Shutdown(ctx)
	}
	if err := waitRollback(ctx, p.DB()); err != nil {
		p.Shutdown(ctx)
		return err
	}
	if check != nil {
		if err := check(p.DB()); err != nil {
			p.Shutdown(ctx)
			return keyError{err}
		}
	}
	if err := p.Shutdown(ctx); err != nil {
		return fmt.Errorf("prepare %s: %w", dir, err)
	}
	return nil
}

// padRedo zero-pads the backup's ib_logfile0 to a whole MiB (zeros end the log) and
// returns its size. Recovery then runs with innodb_log_file_size equal to the file, so
// the server does not first rewrite a log of the source's size (512 MiB took ~10 s
// here); the first normal start resizes it to whatever the server is configured with.
func padRedo(dir string) (int64, error) {
	path := filepath.Join(dir, "ib_logfile0")
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("prepare: backup has no redo log: %w", err)
	}
	size := max((fi.Size()+(1<<20)-1)/(1<<20)*(1<<20), 1<<20)
	if size != fi.Size() {
		if err := os.Truncate(path, size); err != nil {
			return 0, fmt.Errorf("prepare: pad redo log: %w", err)
		}
	}
	return size, nil
}

// waitRollback waits until no recovered transaction is left to roll back.
func waitRollback(ctx context.Context, db *sql.DB) error {
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX").Scan(&n); err != nil {
			return fmt.Errorf("prepare: query recovered transactions: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// markPrepared records the prepare in xtrabackup_checkpoints (as mariadb-backup does)
// and, for ferry backups, in a re-written manifest with the new file checksums.
func (b *Backup) markPrepared(version string, since time.Time) error {
	cp := b.Checkpoints
	cp.BackupType = xtrabackup.TypeLogApplied
	if err := xtrabackup.WriteCheckpoints(b.Dir, cp); err != nil {
		return err
	}
	if b.Manifest == nil {
		return nil
	}
	files, err := scanFiles(b.Dir, b.Manifest.Files, since)
	if err != nil {
		return err
	}
	m := *b.Manifest
	m.Files = files
	m.Prepared = &manifest.Prepared{At: time.Now(), MariadbdVersion: version}
	return manifest.Write(b.Dir, &m)
}
