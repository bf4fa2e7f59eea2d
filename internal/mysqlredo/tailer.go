package mysqlredo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/ferry-backup/ferry/internal/redo"
)

// Defaults and limits of Config.
const (
	DefaultPoll     = 20 * time.Millisecond
	DefaultReadSize = 1 << 20
	minReadSize     = 64 << 10
	maxReadSize     = 64 << 20
)

// Config configures a Tailer.
type Config struct {
	Dir     string         // the server's #innodb_redo directory
	Out     io.Writer      // receives the backup log: a 2048-byte header, then whole blocks
	Server  redo.ServerLSN // bounds reads (flushed LSN) and dates losses (current LSN)
	Creator string         // creator written in the backup log's header, at most 31 bytes
	Poll    time.Duration  // idle poll interval; 0 means DefaultPoll
	// ReadSize is the most bytes read per round; 0 means DefaultReadSize.
	ReadSize int
	// Advance, if set, is called with Copied() after every round that moved it,
	// e.g. (*Consumer).Advance: a redo log consumer registered on the server then
	// keeps it from recycling what is not copied yet. An error ends Run.
	Advance func(ctx context.Context, lsn uint64) error
	// Archive, if set, is a redo log archive the server started for this copy
	// (StartArchive): once the copy reaches the archive's first block, it reads the
	// archive instead of the redo files, which the server cannot overwrite before
	// they are archived. The log from A to the archive's start is read from the
	// files first.
	Archive ArchiveSource
}

// Tailer copies the redo log of a running MySQL 8.0.30+ server, from its newest
// checkpoint A on, into a backup log in XtraBackup 8.0's xtrabackup_logfile layout.
type Tailer struct {
	cfg   Config
	head  Header // the header of the file holding A, as Open read it
	a     uint64 // the checkpoint the copy starts from
	file  *openFile
	buf   []byte
	cur   uint64 // next block to copy; owned by Run
	bad   uint64 // LSN of a block (or file start) found invalid once already, +1
	ran   atomic.Bool
	stop  stopSignal
	prog  progress
	srvAt uint64 // the server's current LSN at the last poll, for errors
	// advanced is the last LSN passed to Config.Advance.
	advanced uint64
	// arch is the archive file once its first block is known; archStart publishes
	// that block's LSN (0 before). archFlush is when Config.Archive was last flushed.
	arch      *openFile
	archStart atomic.Uint64
	archFlush time.Time
}

// openFile is the redo file (or archive file) Run reads from.
type openFile struct {
	File
	fh   *os.File
	base int64 // file offset of StartLSN: HeaderSize, or ArchiveHeaderSize in an archive
}

// Open finds the newest checkpoint A in cfg.Dir and opens the redo file that
// holds it. It writes nothing; Run does.
func Open(cfg Config) (*Tailer, error) {
	cfg, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	files, err := ListFiles(cfg.Dir)
	if err != nil {
		return nil, err
	}
	f, a, err := newestCheckpoint(files)
	if err != nil {
		return nil, fmt.Errorf("redo log %s: %w", cfg.Dir, err)
	}
	if err := checkFlags(files[len(files)-1]); err != nil {
		return nil, err
	}
	of, err := openRedoFile(f.Path, f.ID)
	if err != nil {
		return nil, err
	}
	if of.StartLSN != f.StartLSN {
		of.fh.Close()
		return nil, fmt.Errorf("redo file %s changed while opened: retry", f.Path)
	}
	t := &Tailer{cfg: cfg, head: f.Header, a: a, file: of, cur: a / BlockSize * BlockSize,
		buf: make([]byte, cfg.ReadSize), stop: newStopSignal()}
	t.prog.init(a)
	return t, nil
}

// checkConfig validates cfg and fills in its defaults.
func checkConfig(cfg Config) (Config, error) {
	if cfg.Dir == "" || cfg.Out == nil || cfg.Server == nil {
		return cfg, errors.New("mysql redo tailer: Dir, Out and Server are required")
	}
	if err := checkCreator(cfg.Creator); err != nil {
		return cfg, err
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.ReadSize <= 0 {
		cfg.ReadSize = DefaultReadSize
	}
	cfg.ReadSize = min(max(cfg.ReadSize, minReadSize), maxReadSize) / BlockSize * BlockSize
	return cfg, nil
}

// checkFlags fails if a file says redo logging is or was disabled.
func checkFlags(files ...File) error {
	for _, f := range files {
		if f.Header.Flags&(FlagNoLogging|FlagCrashUnsafe) != 0 {
			return fmt.Errorf("%w (flags %#x in %s)", ErrRedoDisabled, f.Header.Flags, f.Path)
		}
	}
	return nil
}

// openRedoFile opens a redo file and reads its header.
func openRedoFile(path string, id uint64) (*openFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open redo file: %w", err)
	}
	f, err := statFile(fh, path, id)
	if err != nil {
		fh.Close()
		return nil, err
	}
	return &openFile{File: f, fh: fh, base: HeaderSize}, nil
}

// Header returns the header of the server's redo file that holds the start checkpoint.
func (t *Tailer) Header() Header { return t.head }

// Start returns the checkpoint the copy starts from: LSN and EndLSN are both A
// (MySQL's checkpoint has no separate end).
func (t *Tailer) Start() redo.Checkpoint { return redo.Checkpoint{LSN: t.a, EndLSN: t.a} }

// StopAt tells Run to finish once the log up to lsn (E) is copied: every block
// below the one holding E whole, then that block as the server has written it.
// It may be called from any goroutine; later calls are ignored. An lsn below A
// means A.
func (t *Tailer) StopAt(lsn uint64) { t.stop.set(max(lsn, t.a)) }

// Copied returns the LSN up to which the log has been written to Out: the end of
// the whole blocks written (at least A), or after the final partial block, its
// data end.
func (t *Tailer) Copied() uint64 { return t.prog.copied.Load() }

// WaitCopied blocks until Copied() >= lsn, Run has ended, or ctx is done. If Run
// failed, it returns Run's error.
func (t *Tailer) WaitCopied(ctx context.Context, lsn uint64) error {
	return t.prog.wait(ctx, lsn)
}

// ArchiveStart returns the LSN of the first block of Config.Archive once the copy
// knows it, else 0: from there on the log cannot be lost.
func (t *Tailer) ArchiveStart() uint64 { return t.archStart.Load() }

// EndLSN returns E, the StopAt LSN (at least A), once Run has returned nil; else 0.
func (t *Tailer) EndLSN() uint64 { return t.prog.endLSN() }
