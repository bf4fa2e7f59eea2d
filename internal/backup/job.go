package backup

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/stream"
	"golang.org/x/time/rate"
)

// job is the state of one backup run.
type job struct {
	cfg     Config
	log     *slog.Logger
	db      *sql.DB
	info    mariadb.Info
	lock    *mariadb.BackupLock
	prog    *progress.Reporter
	store   store
	repoW   *repo.Writer // the repository backup, if any
	bufs    chan []byte
	tail    *tailer
	limiter *rate.Limiter // nil without --max-rate
	logKeys redo.KeyFunc  // reads an encrypted redo log's records (nil if not encrypted)

	sysChecker *innodb.Checker
	sysHeader  innodb.SpaceHeader

	mu    sync.Mutex
	files map[string]copiedFile // by backup-relative path
	ops   []redo.FileOp
	aria  map[string]*openCopy // Aria logs whose end is copied under BLOCK_COMMIT

	stats struct{ rereads atomic.Int64 }
	m     manifest.Manifest
}

// Result summarises a finished backup.
type Result struct {
	Manifest    *manifest.Manifest
	Dir         string
	BlockCommit time.Duration
	BlockDDL    time.Duration
	PageRereads int64
}

// Run takes a full hot backup into cfg.TargetDir. On failure the directory keeps its
// FERRY_BACKUP_INCOMPLETE marker and has no manifest, so nothing will restore it.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = withDefaults(cfg)
	j := &job{cfg: cfg, log: cfg.Log, files: map[string]copiedFile{}, aria: map[string]*openCopy{}}
	if err := j.checkDestination(); err != nil {
		return nil, err
	}
	j.m.ID = newID()
	res, err := j.run(ctx)
	if err != nil {
		if j.repoW != nil {
			j.repoW.Abort(err)
		}
		return nil, j.explain(err)
	}
	return res, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.NumCPU()
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
		if cfg.Stream != nil || cfg.Repo != nil || cfg.Sink != nil {
			cfg.ChunkSize = DefaultStreamChunkSize // nothing is written to the server's disk
		}
	}
	cfg.ChunkSize = max(cfg.ChunkSize/(64<<10)*(64<<10), 64<<10)
	if cfg.Segment <= 0 {
		cfg.Segment = 256 << 20
	}
	if cfg.Stream != nil {
		cfg.Segment = math.MaxInt64 // a stream takes each file in order: one reader per file
	}
	if cfg.Compression == "" {
		cfg.Compression = codec.None
	}
	if cfg.MaxMemory <= 0 {
		cfg.MaxMemory = DefaultMaxMemory
		if cfg.Repo != nil {
			cfg.MaxMemory = DefaultRepoMaxMemory
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return cfg
}

// checkDestination refuses a target directory that is not new or empty, and a memory
// budget too small for the stream or repository pipeline, before connecting.
func (j *job) checkDestination() error {
	switch {
	case j.cfg.Repo != nil:
		return j.repoOptions().Check()
	case j.cfg.Stream != nil:
		return j.streamOptions().Check()
	case j.cfg.Sink != nil:
		return nil
	}
	return checkTarget(j.cfg.TargetDir)
}

// checkTarget refuses a target directory that exists and is not empty.
func checkTarget(dir string) error {
	if dir == "" {
		return errors.New("--target-dir is required")
	}
	ents, err := os.ReadDir(dir)
	if err == nil && len(ents) > 0 {
		return fmt.Errorf("target directory %s is not empty: choose a new --target-dir (ferry never overwrites a backup)", dir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("target directory %s: %w", dir, err)
	}
	return nil
}

// createTarget creates the target directory (once the server checks passed) and marks
// it incomplete until the manifest is written.
func createTarget(dir string) error {
	if err := checkTarget(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create target directory %s: %w", dir, filecopy.WrapWriteErr(err))
	}
	msg := "ferry backup in progress or interrupted: this directory is not a usable backup.\n"
	return os.WriteFile(filepath.Join(dir, manifest.IncompleteMarker), []byte(msg), 0o640)
}

func (j *job) run(ctx context.Context) (*Result, error) {
	start := time.Now()
	if err := j.connect(ctx); err != nil {
		return nil, err
	}
	defer j.db.Close()
	if err := j.openStore(ctx); err != nil {
		return nil, err
	}
	if j.cfg.Limiter != nil {
		j.limiter = j.cfg.Limiter
	} else if j.cfg.MaxRate > 0 {
		j.limiter = rate.NewLimiter(rate.Limit(j.cfg.MaxRate), int(min(j.cfg.MaxRate, int64(j.cfg.ChunkSize))))
	}
	j.bufs = make(chan []byte, 2*j.cfg.Parallel)
	for range 2 * j.cfg.Parallel {
		j.bufs <- directio.AlignedBuffer(j.cfg.ChunkSize)
	}
	j.log.Info("backup starting", "server", j.info.Version, "datadir", j.info.Datadir, "target", j.target(),
		"compression", j.cfg.Compression, "backup_encryption", j.backupEncryption(), "server_encryption_at_rest", j.info.AtRest(),
		"parallel", j.cfg.Parallel, "memory_budget_mib", j.memoryBudget()>>20)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lock, err := mariadb.NewBackupLock(ctx, j.db)
	if err != nil {
		return nil, err
	}
	j.lock = lock
	defer lock.Close()
	res, err := j.stages(ctx)
	if err != nil {
		return nil, err
	}
	res.Manifest.StartTime = start
	return res, j.finish(res)
}

// openStore creates the target directory, starts the stream, or starts the backup in
// the repository.
func (j *job) openStore(ctx context.Context) error {
	switch {
	case j.cfg.Repo != nil:
		w, err := j.cfg.Repo.NewBackup(ctx, j.m.ID, j.repoOptions())
		if err != nil {
			return err
		}
		j.repoW = w
		j.store = repoStore{ctx: ctx, w: w}
		return nil
	case j.cfg.Stream != nil:
		s, err := newStreamStore(j.cfg.Stream, j.streamOptions())
		j.store = s
		return err
	case j.cfg.Sink != nil:
		j.store = sinkStore{j.cfg.Sink}
		return nil
	}
	j.store = dirStore{dir: j.cfg.TargetDir}
	return createTarget(j.cfg.TargetDir)
}

func (j *job) streamOptions() stream.Options {
	return stream.Options{Compression: j.cfg.Compression, Level: j.cfg.Level, Recipients: j.cfg.Recipients,
		Workers: runtime.NumCPU(), MaxMemory: j.cfg.MaxMemory, OpenFiles: j.cfg.Parallel + 8}
}

func (j *job) repoOptions() repo.WriterOptions {
	return repo.WriterOptions{Pipeline: j.streamOptions(), PartSize: j.cfg.PartSize, MaxMemory: j.cfg.MaxMemory,
		Uploads: j.cfg.Uploads, Version: j.cfg.Version, Log: j.log}
}

// memoryBudget is what the copy buffers and, for a stream or a repository, the
// pipeline may hold.
func (j *job) memoryBudget() int64 {
	n := int64(2 * j.cfg.Parallel * j.cfg.ChunkSize)
	if j.cfg.Stream != nil || j.cfg.Repo != nil {
		n += j.cfg.MaxMemory
	}
	return n
}

// target names where the backup goes, for messages.
func (j *job) target() string {
	switch {
	case j.cfg.Repo != nil:
		return j.cfg.Repo.Location() + " as " + j.m.ID
	case j.cfg.Stream != nil:
		return "stream"
	case j.cfg.Sink != nil:
		return "clone recipient"
	}
	return j.cfg.TargetDir
}

// connect opens the connection, probes the server and checks privileges and access
// to the datadir.
func (j *job) connect(ctx context.Context) error {
	conn, err := j.cfg.Conn.Resolve()
	if err != nil {
		return err
	}
	if j.db, err = mariadb.Open(ctx, conn); err != nil {
		return err
	}
	if j.info, err = mariadb.Probe(ctx, j.db); err != nil {
		j.db.Close()
		return err
	}
	if err := mariadb.CheckPrivileges(ctx, j.db, conn.User, mariadb.BackupPrivileges); err != nil {
		j.db.Close()
		return err
	}
	if _, err := os.Stat(j.redoPath()); err != nil {
		j.db.Close()
		return fmt.Errorf("cannot read the server's redo log %s (%v): ferry backup must run on the database host, as root or the mysql user", j.redoPath(), errors.Unwrap(err))
	}
	if err := j.loadLogKeys(); err != nil {
		j.db.Close()
		return err
	}
	return nil
}

func (j *job) redoPath() string {
	return filepath.Join(dirOr(j.info.Vars["innodb_log_group_home_dir"], j.info.Datadir), "ib_logfile0")
}

// backupEncryption names ferry's own encryption of the backup (not the server's).
func (j *job) backupEncryption() string {
	if len(j.cfg.Recipients) > 0 {
		return "age"
	}
	return "none"
}

// explain turns low-level failures into messages that say what to do.
func (j *job) explain(err error) error {
	partial := fmt.Sprintf("the partial backup in %s is marked incomplete", j.cfg.TargetDir)
	switch {
	case j.cfg.Repo != nil:
		partial = fmt.Sprintf("the partial backup %s has no manifest, so it is not listed as restorable; ferry expire removes it", j.m.ID)
	case j.cfg.Stream != nil:
		partial = "the partial stream has no manifest, so restore will refuse it"
	case j.cfg.Sink != nil:
		partial = "the recipient never received a manifest, so it discards the partial clone"
	}
	switch {
	case errors.Is(err, filecopy.ErrDiskFull) && j.cfg.Repo != nil:
		return fmt.Errorf("the repository's filesystem is full (%v): free space there or run ferry expire; %s", err, partial)
	case errors.Is(err, filecopy.ErrDiskFull):
		return fmt.Errorf("target filesystem is full (%v): free space or choose another --target-dir; %s", err, partial)
	case errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("the reader of the stream went away (broken pipe): check the command ferry's output is piped to; %s", partial)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("backup interrupted; %s", partial)
	case mariadb.IsConnLost(err):
		return fmt.Errorf("lost the connection to the server during the backup (%v): was it restarted or stopped? The backup locks were released; %s, take a new one", err, partial)
	}
	return err
}

// record stores the result of a copy, by its name in the backup.
func (j *job) record(f copiedFile) {
	j.mu.Lock()
	j.files[cmp.Or(f.Stored, f.Rel)] = f
	j.mu.Unlock()
}
