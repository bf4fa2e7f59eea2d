package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/redo"
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
	bufs    chan []byte
	tail    *tailer
	limiter *rate.Limiter // nil without --max-rate

	sysChecker *innodb.Checker
	sysHeader  innodb.SpaceHeader

	mu    sync.Mutex
	files map[string]copiedFile // by backup-relative path
	ops   []redo.FileOp

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
	if err := checkTarget(cfg.TargetDir); err != nil {
		return nil, err
	}
	j := &job{cfg: cfg, log: cfg.Log, files: map[string]copiedFile{}}
	res, err := j.run(ctx)
	if err != nil {
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
	}
	cfg.ChunkSize = max(cfg.ChunkSize/(64<<10)*(64<<10), 64<<10)
	if cfg.Segment <= 0 {
		cfg.Segment = 256 << 20
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return cfg
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
	if err := createTarget(j.cfg.TargetDir); err != nil {
		return nil, err
	}
	if j.cfg.MaxRate > 0 {
		j.limiter = rate.NewLimiter(rate.Limit(j.cfg.MaxRate), int(min(j.cfg.MaxRate, int64(j.cfg.ChunkSize))))
	}
	j.bufs = make(chan []byte, 2*j.cfg.Parallel)
	for range 2 * j.cfg.Parallel {
		j.bufs <- directio.AlignedBuffer(j.cfg.ChunkSize)
	}
	j.log.Info("backup starting", "server", j.info.Version, "datadir", j.info.Datadir, "target", j.cfg.TargetDir,
		"parallel", j.cfg.Parallel, "memory_budget_mib", 2*j.cfg.Parallel*j.cfg.ChunkSize>>20)
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
	return nil
}

func (j *job) redoPath() string {
	return filepath.Join(dirOr(j.info.Vars["innodb_log_group_home_dir"], j.info.Datadir), "ib_logfile0")
}

// explain turns low-level failures into messages that say what to do.
func (j *job) explain(err error) error {
	switch {
	case errors.Is(err, filecopy.ErrDiskFull):
		return fmt.Errorf("target filesystem is full (%v): free space or choose another --target-dir; the partial backup in %s is marked incomplete", err, j.cfg.TargetDir)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("backup interrupted; the partial backup in %s is marked incomplete", j.cfg.TargetDir)
	case mariadb.IsConnLost(err):
		return fmt.Errorf("lost the connection to the server during the backup (%v): was it restarted or stopped? The backup locks were released; the partial backup in %s is marked incomplete, take a new one", err, j.cfg.TargetDir)
	}
	return err
}

// record stores the result of a copy.
func (j *job) record(f copiedFile) {
	j.mu.Lock()
	j.files[f.Rel] = f
	j.mu.Unlock()
}
