// Package archiver follows a MariaDB server's binary log as a replica does (the binlog
// dump protocol, through go-mysql's replication client) and stores the server's binlog
// files byte for byte in a repository's binlog archive as they grow. It resumes from
// the archive's last stored byte after its own restart or the server's, and records a
// gap when the server no longer has what the archive lacks.
package archiver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Config configures the archiver.
type Config struct {
	Conn mariadb.ConnConfig // resolved connection options
	// ServerID is the server_id the archiver registers with, as a replica does; it must
	// differ from every server's and replica's in the topology.
	ServerID uint32
	// FlushInterval bounds how long a received event waits before it is stored.
	FlushInterval time.Duration
	// SegmentSize is the raw size at which a segment is stored at once.
	SegmentSize int
	// MergeSize and MergeEvery bound the small segments a steady load leaves (one per
	// FlushInterval): once the small segments since the last merge hold MergeSize bytes,
	// are MergeEvery old, or their file ends, their bytes (kept in memory) are stored
	// again as one segment and the small ones deleted.
	MergeSize  int
	MergeEvery time.Duration
	// Heartbeat is the interval at which the server is asked to send a heartbeat on an
	// idle binlog; a connection silent for four of them is dropped and made again.
	Heartbeat time.Duration
	// RetryMax is the longest wait between reconnection attempts.
	RetryMax time.Duration
	// StatusEvery is the interval of the log line saying how far the archive goes while
	// it runs.
	StatusEvery time.Duration
	// Stats, if set, is kept up to date while the archiver runs.
	Stats *Stats
	Log   *slog.Logger
}

// Defaults of Config.
const (
	DefaultFlushInterval = 500 * time.Millisecond
	DefaultSegmentSize   = 16 << 20
	DefaultMergeSize     = 32 << 20
	DefaultMergeEvery    = 5 * time.Minute
	DefaultHeartbeat     = time.Second
	DefaultRetryMax      = 30 * time.Second
	DefaultStatusEvery   = 5 * time.Minute
)

// fatalf is an error that stops the archiver: reconnecting would not help.
func fatalf(format string, args ...any) error { return backoff.Permanent(fmt.Errorf(format, args...)) }

// maxRepeats is how many times in a row the server may refuse the dump with the same
// error before the archiver stops: a refusal that a new session's checks do not mend.
const maxRepeats = 5

// Run archives until ctx is cancelled (nil then) or something a reconnection cannot
// mend happens: an account the server refuses at connect (its password, its host,
// its lock or its authentication), a missing grant, a different server behind the
// address, a server without a binlog, a format ferry does not archive, or the server
// refusing the dump the same way maxRepeats times. Lost connections and server
// restarts are retried for ever, with backoff up to RetryMax, each retry logged.
func Run(ctx context.Context, a *binlog.Archive, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	r := &run{a: a, cfg: cfg, log: cfg.Log}
	if err := r.loadTip(ctx); err != nil {
		return err
	}
	if r.tip.pos.File != "" {
		cfg.Stats.tip.Store(&Tip{At: r.tip.pos.String()}) // the status lines start from it
	}
	r.log.Info("binlog-archive: started", "server", cfg.Conn.Where(), "archive", a.Location(), "server_id", cfg.ServerID)
	stop := r.statusLines(ctx)
	defer stop()
	rt := newRetrier(backoff.Policy{Initial: time.Second, Max: cfg.RetryMax})
	for {
		stored := r.stored
		err := r.session(ctx)
		if ctx.Err() != nil {
			r.status("binlog-archive: stopped; what was received is stored")
			return nil
		}
		wait, err := rt.next(err, r.stored > stored)
		if err != nil {
			return err
		}
		r.cfg.Stats.reconnect()
		r.log.Warn("binlog-archive: connection to the server lost; reconnecting", "attempt", rt.b.Attempt(), "in", wait.Round(time.Millisecond), "err", firstLine(rt.err))
		if rt.b.Sleep(ctx, wait) != nil {
			r.status("binlog-archive: stopped; what was received is stored")
			return nil
		}
	}
}

// statusLines logs how far the archive goes every StatusEvery until ctx ends or the
// returned stop is called.
func (r *run) statusLines(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.cfg.StatusEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.status("binlog-archive: archiving")
			}
		}
	}()
	return func() { cancel(); <-done }
}

// status logs msg with how far the archive goes: where it ends and its last GTID, the
// age of the newest event stored (the lag behind a busy server), what this run stored,
// and whether a session follows the server now.
func (r *run) status(msg string) {
	s := r.cfg.Stats
	args := []any{"stored_bytes", s.StoredBytes.Load(), "segments", s.Segments.Load(), "reconnects", s.Reconnects.Load(), "connected", s.Connected.Load()}
	if tip := s.Tip(); tip != nil {
		args = append(args, "at", tip.At, "last_gtid", tip.GTID)
	}
	if ev := s.LastEventTime.Load(); ev > 0 {
		args = append(args, "newest_event_age", time.Since(time.Unix(ev, 0)).Round(time.Second))
	}
	r.log.Info(msg, args...)
}

// retrier decides, after each session, whether the archiver goes on and after what
// wait.
type retrier struct {
	b       *backoff.Backoff
	err     error  // why the last session ended
	last    string // the repeatable refusal of the last sessions
	repeats int    // how many sessions in a row ended with it
}

func newRetrier(p backoff.Policy) *retrier { return &retrier{b: backoff.New(p)} }

// next takes the error a session ended with (stored: it stored something) and
// returns the wait before the next session, or the error that stops the archiver: a
// permanent one, or the same repeatable refusal maxRepeats times in a row.
func (t *retrier) next(err error, stored bool) (time.Duration, error) {
	t.err = err
	if backoff.IsPermanent(err) {
		return 0, err
	}
	if stored {
		t.b.Reset()
		t.last, t.repeats = "", 0
	}
	if isRepeatable(err) {
		if firstLine(err) != t.last {
			t.last, t.repeats = firstLine(err), 0
		}
		if t.repeats++; t.repeats >= maxRepeats {
			return 0, fmt.Errorf("the server refused the binlog dump %d times in a row: %s: see its error log; if its binlog was reset, archive it into another repository", t.repeats, t.last)
		}
	}
	wait, _ := t.b.Next()
	return wait, nil
}

// defaults fills unset options; a negative one is an error.
func (c *Config) defaults() error {
	if c.FlushInterval < 0 || c.SegmentSize < 0 || c.MergeSize < 0 || c.MergeEvery < 0 || c.Heartbeat < 0 || c.RetryMax < 0 {
		return setting.Errorf("%s, %s, %s, %s, %s and %s must be positive", setting.FlushInterval, setting.SegmentSize, setting.MergeSize, setting.MergeEvery, setting.Heartbeat, setting.RetryMax)
	}
	c.FlushInterval = cmp.Or(c.FlushInterval, DefaultFlushInterval)
	c.SegmentSize = cmp.Or(c.SegmentSize, DefaultSegmentSize)
	c.MergeSize = cmp.Or(c.MergeSize, DefaultMergeSize)
	c.MergeEvery = cmp.Or(c.MergeEvery, DefaultMergeEvery)
	c.Heartbeat = cmp.Or(c.Heartbeat, DefaultHeartbeat)
	c.RetryMax = cmp.Or(c.RetryMax, DefaultRetryMax)
	c.StatusEvery = cmp.Or(c.StatusEvery, DefaultStatusEvery)
	if c.Stats == nil {
		c.Stats = &Stats{} // the status lines read it
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// run is the archiver's state across sessions.
type run struct {
	a       *binlog.Archive
	cfg     Config
	log     *slog.Logger
	tip     tip
	stored  int64  // bytes stored by this run
	account string // the archiver's user as the server knows it, quoted for GRANT
}

// tip is where the archive ends.
type tip struct {
	pos      binlog.Position // where the next byte of pos.File goes; File "" if empty
	last     binlog.Event    // the last stored event (Raw not kept)
	complete bool            // pos.File ends there (its last event is a Rotate or a Stop)
}

// firstLine is an error's message without the stack trace the replication client's
// errors carry.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}
