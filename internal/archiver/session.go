package archiver

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// session connects, streams from where the archive ends, and stores what arrives
// until the connection fails or ctx is cancelled; what it received is stored first.
func (r *run) session(ctx context.Context) error {
	db, err := mariadb.Open(ctx, r.cfg.Conn)
	if err != nil {
		return classify(err, stageConnect, "")
	}
	r.account = account(ctx, db, r.cfg.Conn.User)
	logs, err := binaryLogs(ctx, db)
	var start binlog.Position
	if err == nil {
		start, err = r.startPosition(ctx, db, logs)
	}
	db.Close()
	if err != nil {
		return classify(err, stageQuery, r.account)
	}
	syncer := replication.NewBinlogSyncer(r.syncerConfig())
	defer syncer.Close()
	stream, err := syncer.StartSync(mysql.Position{Name: start.File, Pos: uint32(start.Pos)})
	if err != nil {
		return classify(fmt.Errorf("start the binlog dump at %s: %w", start, err), stageDump, r.account)
	}
	r.log.Info("binlog-archive: following the server's binlog", "from", start.String(), "server", r.cfg.Conn.Where())
	r.cfg.Stats.connected(true)
	defer r.cfg.Stats.connected(false)
	s := &follower{run: r, cur: start, spare: make(chan []byte, 1),
		buf: make([]byte, 0, r.cfg.SegmentSize), merged: make([]byte, 0, r.cfg.MergeSize+r.cfg.SegmentSize)}
	err = s.follow(ctx, stream)
	if ferr := s.flush(context.WithoutCancel(ctx)); ferr != nil && err == nil {
		err = ferr
	}
	s.merge(context.WithoutCancel(ctx))
	s.waitMerge()
	return classify(err, stageDump, r.account)
}

// account is the archiver's user as the server knows it, 'user'@'host', as a GRANT
// names it; the bare user name if the server does not say.
func account(ctx context.Context, db *sql.DB, user string) string {
	var cu string
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&cu); err == nil {
		if i := strings.LastIndexByte(cu, '@'); i >= 0 {
			return fmt.Sprintf("'%s'@'%s'", cu[:i], cu[i+1:])
		}
	}
	return fmt.Sprintf("'%s'", user)
}

// syncerConfig is the replication client's configuration: raw events (ferry stores
// them, it does not decode rows), every checksum verified, Annotate_rows events sent
// (the file holds them), and no reconnection of its own (the session does that, from
// the archive's end).
func (r *run) syncerConfig() replication.BinlogSyncerConfig {
	c := r.cfg.Conn
	sc := replication.BinlogSyncerConfig{
		ServerID: r.cfg.ServerID, Flavor: mysql.MariaDBFlavor,
		User: c.User, Password: c.Password,
		RawModeEnabled: true, VerifyChecksum: true, DisableRetrySync: true,
		DumpCommandFlag: replication.BINLOG_SEND_ANNOTATE_ROWS_EVENT,
		HeartbeatPeriod: r.cfg.Heartbeat, ReadTimeout: 4 * r.cfg.Heartbeat,
		Localhost: "ferry-binlog-archive", Logger: slog.New(warnOnly{r.log.Handler()}).With("component", "go-mysql"),
	}
	if c.Socket != "" && c.Host == "" {
		sc.Host = c.Socket
		sc.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.Socket)
		}
	} else {
		sc.Host, sc.Port = c.Host, uint16(c.Port)
	}
	return sc
}

// follower is one session's progress: the file and offset the next byte belongs at, and
// the bytes received and not stored yet.
type follower struct {
	*run
	cur      binlog.Position
	buf      []byte
	bufStart int64
	bufSince time.Time // when the oldest unstored byte arrived
	pending  tip       // the archive's tip once buf is stored
	// dec and groups follow the transactions: lastGTID is the last one complete.
	dec      *binlog.Decoder
	groups   *binlog.Tracker
	lastGTID string
	// small are the segments stored since the last merge, merged their bytes; a merge
	// runs in the background (merging is closed when it ends) on a buffer of its own,
	// which it hands back in spare.
	small       []binlog.Segment
	merged      []byte
	mergedSince time.Time
	merging     chan struct{}
	spare       chan []byte
}

// follow stores events as they arrive, and at least every FlushInterval. While bytes
// wait, events are read under one deadline: the flush's.
func (s *follower) follow(ctx context.Context, stream *replication.BinlogStreamer) error {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	defer func() { cancel() }()
	for {
		if len(s.buf) > 0 && wctx == ctx {
			var c context.CancelFunc
			wctx, c = context.WithDeadline(ctx, s.bufSince.Add(s.cfg.FlushInterval))
			cancel = c
		}
		ev, err := stream.GetEvent(wctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			err = s.flush(ctx)
		case err == nil:
			err = s.take(ctx, ev)
		}
		if err != nil {
			return err
		}
		if len(s.buf) == 0 && wctx != ctx {
			cancel()
			wctx = ctx
		}
	}
}

// take places one received event: a new file, the file's Format_description, or the
// next event of the current file, which must start exactly where the archive ends.
func (s *follower) take(ctx context.Context, ev *replication.BinlogEvent) error {
	e, err := binlog.SplitEvent(ev.RawData, 0)
	if err != nil || int64(len(ev.RawData)) != e.End {
		return fmt.Errorf("malformed event from the server: %v", err)
	}
	switch {
	case e.Type == replication.HEARTBEAT_EVENT:
		return nil
	case e.Type == replication.MARIADB_START_ENCRYPTION_EVENT:
		return fatalf("the server encrypts its binlog (encrypt_binlog): ferry does not archive encrypted binlogs yet")
	case e.Type == replication.ROTATE_EVENT && e.Artificial():
		return s.rotate(ctx, ev)
	case e.Type == replication.FORMAT_DESCRIPTION_EVENT && s.cur.Pos > 4:
		return s.decoder(ev.RawData) // sent again at the start of a dump in the middle of a file
	case e.Type == replication.FORMAT_DESCRIPTION_EVENT:
		fde := fixFDE(ev.RawData, s.cur.Pos)
		s.add(append([]byte("\xfebin"), fde...), 0)
		s.advance(e, 4)
		return s.decoder(fde)
	case e.Artificial():
		s.log.Debug("binlog-archive: an event the server made for the dump, not stored", "type", e.Type.String(), "at", s.cur.String())
		return nil
	}
	// Since 11.4 (binlog_legacy_event_pos=OFF) an event inside a transaction says it
	// ends at 0: it follows the one before, and the group's last event, which gives its
	// end, checks that nothing was left out between.
	if start := int64(e.LogPos) - int64(len(ev.RawData)); e.LogPos != 0 && start != s.cur.Pos {
		return fmt.Errorf("the server sent an event of %s at offset %d, the archive ends at %d: not storing a gap or an overlap", s.cur.File, start, s.cur.Pos)
	}
	if err := s.follow1(e, s.cur.Pos); err != nil {
		return err
	}
	s.add(ev.RawData, s.cur.Pos)
	s.advance(e, s.cur.Pos)
	if s.pending.complete || len(s.buf) >= s.cfg.SegmentSize {
		return s.flush(ctx)
	}
	return nil
}

// decoder starts decoding the file's events with its Format_description.
func (s *follower) decoder(fde []byte) error {
	e, err := binlog.SplitEvent(fde, 4)
	if err == nil {
		s.dec, err = binlog.NewDecoder(e)
	}
	if err != nil {
		return fmt.Errorf("the server's Format_description event: %w", err)
	}
	s.groups = binlog.NewTracker(binlog.State{})
	return nil
}

// follow1 follows the transactions through event e, at offset at, noting the last
// complete one (the log says which the archive holds).
func (s *follower) follow1(e binlog.Event, at int64) error {
	if s.dec == nil {
		return nil
	}
	e.Start, e.End = at, at+int64(len(e.Raw))
	_, done, err := s.groups.Step(s.dec, s.cur.File, e)
	if done != nil {
		s.lastGTID = done.GTID.String()
	}
	if err != nil {
		s.groups = binlog.NewTracker(binlog.State{}) // a group cut short: follow the next
	}
	return nil
}

// advance moves past event e, which starts at offset at: the archive's tip once the
// buffer is stored.
func (s *follower) advance(e binlog.Event, at int64) {
	s.cur.Pos = at + int64(len(e.Raw))
	s.pending = tip{pos: s.cur, last: binlog.Event{Type: e.Type, Start: at, ServerID: e.ServerID, Timestamp: e.Timestamp},
		complete: e.Type == replication.ROTATE_EVENT || e.Type == replication.STOP_EVENT}
}

// rotate follows the server to another file (or confirms the file a dump starts in).
func (s *follower) rotate(ctx context.Context, ev *replication.BinlogEvent) error {
	rot, ok := ev.Event.(*replication.RotateEvent)
	if !ok {
		return errors.New("malformed Rotate event from the server")
	}
	next := binlog.Position{File: string(rot.NextLogName), Pos: int64(rot.Position)}
	if err := binlog.CheckFile(next.File); err != nil {
		return fatalf("the server's %w", err)
	}
	if next.File == s.cur.File {
		return nil
	}
	if next.Pos != 4 || binlog.CompareFiles(next.File, s.cur.File) < 0 {
		return fmt.Errorf("the server moved from %s to %s, not to the start of a later file", s.cur, next)
	}
	if err := s.flush(ctx); err != nil {
		return err
	}
	s.merge(ctx)
	if !s.tip.complete && s.tip.pos.File == s.cur.File {
		s.log.Warn("binlog-archive: the server moved on from a file that ends without a Rotate or Stop event (a crash?)", "file", s.cur.File, "at", s.cur.Pos)
	}
	s.log.Info("binlog-archive: next binlog file", "file", next.File)
	s.cur = next
	return nil
}

// add appends an event's bytes to the unstored buffer.
func (s *follower) add(b []byte, at int64) {
	if len(s.buf) == 0 {
		s.bufStart, s.bufSince = at, time.Now()
	}
	s.buf = append(s.buf, b...)
}

// flush stores the buffer as one segment.
func (s *follower) flush(ctx context.Context) error {
	if len(s.buf) == 0 {
		return nil
	}
	seg, err := s.a.Put(ctx, s.cur.File, s.bufStart, s.buf)
	if err != nil {
		return err
	}
	s.stored += int64(len(s.buf))
	s.tip = s.pending
	s.cfg.Stats.stored(int64(len(s.buf)), s.tip.last.Timestamp, time.Now(), Tip{At: s.tip.pos.String(), GTID: s.lastGTID})
	s.log.Debug("binlog-archive: stored", "file", seg.File, "start", seg.Start, "end", seg.End,
		"last_gtid", s.lastGTID, "waited_ms", time.Since(s.bufSince).Milliseconds())
	if len(s.small) == 0 {
		s.mergedSince = time.Now()
	}
	s.small = append(s.small, seg)
	s.merged = append(s.merged, s.buf...)
	s.buf = s.buf[:0]
	if s.tip.complete || len(s.merged) >= s.cfg.MergeSize || time.Since(s.mergedSince) >= s.cfg.MergeEvery {
		s.merge(ctx)
	}
	return nil
}

// merge stores the bytes of the small segments since the last merge again as one
// segment and deletes the small ones, in the background: the stream goes on meanwhile.
// A failure is not the archive's: the small segments hold the same bytes, and a later
// archiver deletes what a merged segment covers.
func (s *follower) merge(ctx context.Context) {
	small, data := s.small, s.merged
	s.small = nil
	if len(small) < 2 {
		s.merged = data[:0]
		return
	}
	s.waitMerge()
	select {
	case b := <-s.spare:
		s.merged = b[:0]
	default:
		s.merged = make([]byte, 0, s.cfg.MergeSize+s.cfg.SegmentSize)
	}
	s.merging = make(chan struct{})
	go func() {
		defer close(s.merging)
		defer func() { s.spare <- data[:0] }()
		seg, err := s.a.Put(ctx, small[0].File, small[0].Start, data)
		if err != nil {
			s.log.Warn("binlog-archive: merging small segments failed; they stay as they are", "file", small[0].File, "err", err)
			return
		}
		for _, sm := range small {
			if err := s.a.Delete(ctx, sm); err != nil {
				s.log.Warn("binlog-archive: deleting a merged segment failed; it is ignored and deleted later", "key", sm.Key, "err", err)
			}
		}
		s.log.Debug("binlog-archive: merged", "file", seg.File, "start", seg.Start, "end", seg.End, "segments", len(small))
	}()
}

// waitMerge waits for the background merge, if one runs.
func (s *follower) waitMerge() {
	if s.merging != nil {
		<-s.merging
		s.merging = nil
	}
}

// fixFDE gives back the Format_description event as the file holds it: the server
// sends the one that opens a dump with log_pos 0 (so a replica does not take it for a
// position), re-checksummed; in the file it ends at its own size past the magic bytes.
func fixFDE(raw []byte, at int64) []byte {
	b := append([]byte(nil), raw...)
	if binary.LittleEndian.Uint32(b[13:17]) != 0 {
		return b
	}
	binary.LittleEndian.PutUint32(b[13:17], uint32(at+int64(len(b))))
	// The checksum algorithm is the byte before the checksum: 1 is CRC32.
	if len(b) >= 19+5 && b[len(b)-5] == 1 {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	}
	return b
}

// warnOnly passes on the replication client's warnings and errors; its routine lines
// (each rotation, twice) would drown the archiver's own.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnOnly) WithAttrs(a []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(a)} }

func (w warnOnly) WithGroup(n string) slog.Handler { return warnOnly{w.Handler.WithGroup(n)} }
