package backup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ferry-backup/ferry/internal/clock"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/spool"
	"golang.org/x/time/rate"
)

// job is the state of one backup run.
type job struct {
	cfg   Config
	mode  mode       // full or incremental (mode.go), chosen once in Run
	ddl   reconciler // how DDL run during the copy is reconciled on this end (mode.go)
	log   *slog.Logger
	srv   Server // the server copied (Config.Server's session)
	info  mariadb.Info
	lock  stageLock
	prog  *progress.Reporter
	bufs  chan []byte
	tail  *tailer   // the redo copy the backup keeps
	tails []*tailer // every redo copy opened, released at the end
	// openRedo opens a redo copy and checkpoint reads the server's newest checkpoint
	// LSN: the server's RedoLog on its ib_logfile0, or fakes in unit tests.
	openRedo   func(redo.Config) (RedoCopy, error)
	checkpoint func() (uint64, error)
	// retiredOps are the file-level records of redo copies that ended before the kept
	// one started (the three-stage copy's trackers), below where the next one started.
	retiredOps []redo.FileOp
	sink       sink.Sink
	opened     bool          // the sink was opened: a failure leaves a partial backup
	limiter    *rate.Limiter // nil without --max-rate
	logKeys    redo.KeyFunc  // reads an encrypted redo log's records (nil if not encrypted)
	// spoolLimit bounds the redo spool (--max-spool or its default)
	spoolLimit int64

	sysChecker *innodb.Checker
	sysHeader  innodb.SpaceHeader

	mu    sync.Mutex
	files map[string]copiedFile // by backup-relative path
	sent  sink.Sent             // every file started in the sink, by its stored name
	aria  map[string]*openCopy  // Aria logs whose end is copied under BLOCK_COMMIT
	held  *lockSpool            // what is copied under the backup locks, while they are held

	// lostSpaces are tablespaces the three-stage copy could not copy again (renamed or
	// dropped meanwhile): the DDL reconciliation copies them whole.
	lostSpaces map[uint32]bool
	// read: data file bytes, for the pace; resumeKept and resumePatched: bytes of held
	// ranges a resumed copy kept as stored and stored again (resume.go)
	stats   struct{ rereads, freePages, read, resumeKept, resumePatched atomic.Int64 }
	recopy  recopyStats
	resumed resumedChanges // a resumed copy's pages changed since its held ranges were read (resume.go)
	rolled  *rolled        // the roll-forward, if it ran
	// clock is the job's clock (Config.Clock: the wall clock, or a test's fake).
	// copyStart is when the redo copy began: the three-stage copy measures rates from it.
	clock     clock.Clock
	copyStart time.Time
	m         manifest.Manifest
}

// Result summarises a finished backup.
type Result struct {
	Manifest *manifest.Manifest
	Dir      string
	// BlockCommit and BlockDDL are how long each lock was held.
	BlockCommit time.Duration
	BlockDDL    time.Duration
	PageRereads int64
	// FreePages is how many pages the extent descriptors marked free and the
	// copy stored as zeros (holes in a directory).
	FreePages int64
	// Rounds and PagesRecopied tell what the three-stage copy did (0: it was off).
	Rounds        int
	PagesRecopied int64
	// HeldKept and HeldPatched are, for a resumed backup, the bytes of ranges an
	// interrupted attempt stored that were kept as they were, and those whose pages
	// had changed and were stored again.
	HeldKept, HeldPatched int64
}

// Run takes a full hot backup into cfg.Sink. On failure the end never gets a manifest,
// so nothing will restore the partial backup; the error says how it was left.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Sink == nil {
		return nil, errors.New("backup: no destination (internal error)")
	}
	md := modeFor(cfg)
	cfg = withDefaults(cfg, md)
	j := &job{cfg: cfg, log: cfg.Log, sink: cfg.Sink, clock: cfg.Clock, mode: md, ddl: md.reconciler(cfg.Sink.Caps()),
		files: map[string]copiedFile{}, sent: sink.Sent{}, aria: map[string]*openCopy{}}
	j.m.ID = newID(cfg.Clock.Now())
	res, err := j.run(ctx)
	if err != nil {
		return nil, j.explain(err, j.opened)
	}
	return res, nil
}

// withDefaults fills what cfg leaves zero; md is the backup's mode.
func withDefaults(cfg Config, md mode) Config {
	if cfg.Parallel <= 0 {
		cfg.Parallel = defaults.BackupParallel
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
		if cfg.Sink.Caps().Remote || md.smallChunks() {
			// nothing is written to the server's disk, or (an incremental) little
			cfg.ChunkSize = DefaultStreamChunkSize
		}
	}
	cfg.ChunkSize = max(cfg.ChunkSize/(64<<10)*(64<<10), 64<<10)
	cfg.Replica.SafeSlaveTimeout = cmp.Or(cfg.Replica.SafeSlaveTimeout, defaults.SafeSlaveTimeout)
	if cfg.Segment <= 0 {
		cfg.Segment = defaults.Segment
	}
	if !cfg.Sink.Caps().Rewrite {
		cfg.Segment = math.MaxInt64 // each file is written in order: one reader per file
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Server == nil {
		cfg.Server = Detect(cfg.Conn, cfg.Log, cfg.RedoArchive)
	}
	return cfg
}

func (j *job) run(ctx context.Context) (*Result, error) {
	start := j.clock.Now()
	if err := j.connect(ctx); err != nil {
		return nil, err
	}
	defer j.srv.Close()
	pace := watchPace(ctx, j.cfg, j.log) // its baseline runs while the copy is prepared
	defer pace.release()
	rl := j.srv.Redo()
	j.openRedo = rl.Open
	j.checkpoint = func() (uint64, error) { return rl.Checkpoint(j.redoPath()) }
	var err error
	if j.spoolLimit, err = j.spoolMax(); err != nil {
		return nil, err
	}
	if p, err := j.scan(); err != nil {
		return nil, err
	} else if _, err := j.lockSpoolRoom(p); err != nil { // refused before the first byte, checked again before the locks
		return nil, err
	} else {
		pace = pace.worth(p)
	}
	if err := j.mode.begin(ctx, j); err != nil {
		return nil, err
	}
	if err := j.checkRoom(ctx); err != nil {
		return nil, err
	}
	if err := j.sink.Open(ctx, j.m.ID); err != nil {
		return nil, err
	}
	j.opened = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	switch {
	case j.cfg.MaxImpact > 0 || j.cfg.WatchRedo:
		if j.cfg.Monitor == nil {
			j.cfg.Monitor = &Monitor{}
		}
		j.limiter = startThrottle(ctx, j.cfg, j.cfg.MaxImpact, j.cfg.Monitor, j.log)
	case j.cfg.MaxRate > 0:
		j.limiter = rate.NewLimiter(rate.Limit(j.cfg.MaxRate), int(min(j.cfg.MaxRate, int64(j.cfg.ChunkSize))))
	case pace != nil:
		j.limiter = pace.start(ctx, &j.stats.read)
	}
	j.bufs = make(chan []byte, j.copyBuffers())
	for range j.copyBuffers() {
		j.bufs <- directio.AlignedBuffer(j.cfg.ChunkSize)
	}
	j.log.Info("backup starting", "server", j.info.Version, "datadir", j.info.Datadir, "target", j.sink.Name(),
		"compression", cmp.Or(j.sink.Caps().Storage.Compression, "none"), "backup_encryption", cmp.Or(j.sink.Caps().Storage.Encryption, "none"), "server_encryption_at_rest", j.info.AtRest(),
		"parallel", j.cfg.Parallel, "memory_budget_mib", j.memoryBudget()>>20)
	lock, err := j.srv.BackupLock(ctx)
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
	return res, j.finish(ctx, res)
}

// memoryBudget is what the copy buffers, the end's own pipeline and the redo spool's
// memory tier may hold.
func (j *job) memoryBudget() int64 {
	return int64(j.copyBuffers()*j.cfg.ChunkSize) + j.sink.Caps().Memory + spoolMemory + j.mode.memory(j)
}

// copyBuffers is how many chunk buffers the copy workers share: two per worker (one
// being read, one being written), large-file and small-file workers alike.
func (j *job) copyBuffers() int { return 2 * (j.cfg.Parallel + j.smallWorkers()) }

// connect opens a session on the server (the one probe, with the privileges check)
// and checks access to the datadir.
func (j *job) connect(ctx context.Context) error {
	srv, err := j.cfg.Server.Connect(ctx)
	if err != nil {
		return err
	}
	j.srv, j.info = srv, srv.Info()
	if err := j.checkAccess(ctx); err != nil {
		srv.Close()
		return err
	}
	return nil
}

// checkAccess refuses, before anything is written, a backup whose replica sources
// cannot be read when it must record them, or whose redo log ferry cannot read.
func (j *job) checkAccess(ctx context.Context) error {
	if o := j.cfg.Replica; (o.Info && !o.BestEffort) || o.SafeSlave {
		if _, err := j.srv.ReplicaSources(ctx); err != nil { // refused now, not after the copy
			return setting.Errorf("%s/%s: %w", setting.SlaveInfo, setting.SafeSlaveBackup, err)
		}
	}
	if _, err := os.Stat(j.redoPath()); err != nil {
		return fmt.Errorf("cannot read the server's redo log %s (%v): ferry backup must run on the database host, as root or the mysql user", j.redoPath(), errors.Unwrap(err))
	}
	return j.loadLogKeys()
}

func (j *job) redoPath() string { return j.redoLog().Path() }

// redoLog is the server's redo log; a job built without a server (unit tests of its
// parts) has MariaDB's.
func (j *job) redoLog() RedoLog {
	if j.srv == nil {
		return MariaDBRedo(j.info)
	}
	return j.srv.Redo()
}

// layout is the server's file layout; MariaDB's for a job built without a server.
func (j *job) layout() Layout {
	if j.srv == nil {
		return MariaDBLayout()
	}
	return j.srv.Layout()
}

// explain turns low-level failures into messages that say what to do.
func (j *job) explain(err error, opened bool) error {
	partial := "nothing was written"
	if opened {
		partial = j.sink.Abort(err)
	}
	switch {
	case errors.Is(err, filecopy.ErrDiskFull):
		return fmt.Errorf("the filesystem of %s is full (%v): free space there, choose another destination or (a repository) run ferry expire; %s", j.sink.Name(), err, partial)
	case errors.Is(err, spool.ErrFull):
		return setting.Errorf("the redo copy outran the destination (%v): give %s more, or %s a directory with more space, or a faster destination; %s", err, setting.MaxSpool, setting.Tmpdir, partial)
	case errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("the reader of the stream went away (broken pipe): check the command ferry's output is piped to; %s", partial)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("backup interrupted; %s", partial)
	case !opened && errors.Is(err, mariadb.ErrConnect): // never connected: it says why
		return err
	case mariadb.IsConnLost(err):
		return mariadb.Unreachable(setting.Errorf("lost the connection to the server during the backup (%v): was it restarted or stopped? The backup locks were released; %s, take a new one", err, partial))
	}
	return err
}

// record stores the result of a copy, by its name in the backup.
func (j *job) record(f copiedFile) {
	j.mu.Lock()
	j.files[cmp.Or(f.Stored, f.Rel)] = f
	j.mu.Unlock()
}
