package redo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults and limits of Config.
const (
	DefaultPoll     = 20 * time.Millisecond
	DefaultReadSize = 8 << 20
	// minReadSize lets the largest mini-transaction fit in one read.
	minReadSize = MTRSizeMax + 64<<10
	// lapMargin is how close the server's current LSN may come to the
	// copy position plus the capacity before the region counts as
	// overwritten: the server rewrites whole log blocks beyond its
	// current LSN.
	lapMargin = 64 << 10
)

// ServerLSN reports the server's durable and current LSN, e.g. from SHOW
// GLOBAL STATUS Innodb_lsn_flushed / Innodb_lsn_current.
type ServerLSN interface {
	LSNs(ctx context.Context) (flushed, current uint64, err error)
}

// Config configures a Tailer.
type Config struct {
	Path     string       // the server's ib_logfile0
	Out      io.Writer    // receives BackupHeader(...) first, then the copied mini-transactions with every sequence byte set to 1
	Server   ServerLSN    // bounds reads (flushed LSN) and detects laps (current LSN)
	Creator  string       // creator of the backup log, e.g. "Backup ferry 0.1"
	OnFileOp func(FileOp) // optional: file-level records in the copied range, called from Run's goroutine
	// Pages, if set, gathers every page the copied mini-transactions touch.
	Pages *PageSet
	// Keys and Algorithm read an encrypted log's file-level records (FormatKey):
	// the key management plugin's keys and file_key_management_encryption_algorithm.
	// Open fails with ErrNeedKey for such a log without Keys, if OnFileOp or Pages is set.
	Keys      KeyFunc
	Algorithm string
	// From, if set, starts the copy at this LSN instead of the latest checkpoint: a
	// mini-transaction boundary the server's log still holds (an older checkpoint's
	// LSN). An incremental backup reads the redo since its base from it to learn the
	// pages changed since; Run fails with *OverwrittenError if the server has written
	// over it, and Open if the log file starts after it.
	From     uint64
	Poll     time.Duration // idle poll interval; 0 means DefaultPoll
	ReadSize int           // bytes per read; 0 means DefaultReadSize
}

// Tailer copies the redo log of a running server from its latest checkpoint
// into a linear backup log.
type Tailer struct {
	cfg   Config
	log   *logFile // the file being read
	next  *logFile // the file that replaced log (online resize), not read yet
	start Checkpoint
	crypt *LogCrypt // reads the file-level records of a FormatKey log
	buf   []byte
	cur   uint64   // next LSN to copy; owned by Run
	bad   uint64   // LSN of an invalid mini-transaction seen once already
	ids   []PageID // the pages of the mini-transaction being read, reused
	ran   atomic.Bool

	stop stopSignal
	prog progress
}

// Open opens the server's ib_logfile0 (O_DIRECT where possible), reads its
// header and latest checkpoint. It writes nothing; Run does.
func Open(cfg Config) (*Tailer, error) {
	if cfg.Path == "" || cfg.Out == nil || cfg.Server == nil {
		return nil, errors.New("redo tailer: Path, Out and Server are required")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.ReadSize <= 0 {
		cfg.ReadSize = DefaultReadSize
	}
	cfg.ReadSize = int(roundUp(int64(max(cfg.ReadSize, minReadSize))))
	l, err := openLog(cfg.Path)
	if err != nil {
		return nil, err
	}
	cp, err := ParseCheckpoint(l.head, l.hdr.FirstLSN)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("redo log %s: %w", cfg.Path, err)
	}
	var crypt *LogCrypt
	if cfg.OnFileOp != nil || cfg.Pages != nil {
		if crypt, err = NewLogCrypt(l.hdr, cfg.Keys, cfg.Algorithm); err != nil {
			l.close()
			return nil, fmt.Errorf("redo log %s: %w", cfg.Path, err)
		}
	}
	if cfg.From != 0 {
		if cfg.From < l.hdr.FirstLSN || cfg.From > cp.EndLSN {
			l.close()
			return nil, &OverwrittenError{Copied: cfg.From, Server: cp.EndLSN, Capacity: l.ring.capacity}
		}
		cp = Checkpoint{LSN: cfg.From, EndLSN: cfg.From}
	}
	t := &Tailer{cfg: cfg, log: l, start: cp, cur: cp.LSN, crypt: crypt,
		buf: alignedBuf(cfg.ReadSize + 2*align), stop: newStopSignal()}
	t.prog.init(cp.LSN)
	return t, nil
}

// Header returns the header of the server's log as read by Open.
func (t *Tailer) Header() Header { return t.log.hdr }

// Start returns the checkpoint the copy starts from (A) and its end LSN.
func (t *Tailer) Start() Checkpoint { return t.start }

// StopAt tells Run to finish once every mini-transaction starting below lsn
// has been copied. It may be called from any goroutine, once.
func (t *Tailer) StopAt(lsn uint64) { t.stop.set(lsn) }

// Copied returns the LSN up to which the log has been copied to Out.
func (t *Tailer) Copied() uint64 { return t.prog.copied.Load() }

// WaitCopied blocks until Copied() >= lsn, Run has ended, or ctx is done.
// If Run failed, it returns Run's error.
func (t *Tailer) WaitCopied(ctx context.Context, lsn uint64) error {
	return t.prog.wait(ctx, lsn)
}

// EndLSN returns B', the LSN where the copy ended, after Run returned nil:
// an mtr boundary at or above the StopAt LSN.
func (t *Tailer) EndLSN() uint64 { return t.prog.endLSN() }

// stopSignal carries StopAt to Run.
type stopSignal struct {
	lsn  atomic.Uint64
	once *sync.Once
	ch   chan struct{} // closed by set
}

func newStopSignal() stopSignal {
	return stopSignal{once: new(sync.Once), ch: make(chan struct{})}
}

// set records the stop LSN and wakes Run; later calls are ignored.
func (s *stopSignal) set(lsn uint64) {
	s.once.Do(func() {
		s.lsn.Store(lsn)
		close(s.ch)
	})
}

// isSet reports whether StopAt was called.
func (s *stopSignal) isSet() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// reached reports whether a stop LSN was set and lsn is at or beyond it.
func (s *stopSignal) reached(lsn uint64) bool {
	return s.isSet() && lsn >= s.lsn.Load()
}
