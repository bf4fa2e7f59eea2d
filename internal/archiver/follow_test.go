package archiver

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/go-mysql-org/go-mysql/replication"
)

// The binlog package's fixtures (mysql-bin.000001 to 000003 of a MariaDB 10.11): 000002
// ends with a Rotate, 000003 with a Stop event.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "binlog", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newRun is an archiver's state on an archive in a temporary directory, as Run sets it
// up, with small segments so a file is stored in several.
func newRun(t *testing.T, a *binlog.Archive) *run {
	t.Helper()
	cfg := Config{SegmentSize: 1000, MergeSize: 1 << 20, MergeEvery: time.Hour, Stats: &Stats{}}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	return &run{a: a, cfg: cfg, log: cfg.Log}
}

func newArchive(t *testing.T) *binlog.Archive {
	t.Helper()
	st, err := storage.Open(context.Background(), storage.Config{URL: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := binlog.Open(st, binlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// rawEvent builds an event: header (timestamp 0, server id 1), body, no checksum.
func rawEvent(typ replication.EventType, logPos uint32, flags uint16, body []byte) []byte {
	b := make([]byte, 19, 19+len(body))
	b[4] = byte(typ)
	binary.LittleEndian.PutUint32(b[5:9], 1)
	binary.LittleEndian.PutUint32(b[9:13], uint32(19+len(body)))
	binary.LittleEndian.PutUint32(b[13:17], logPos)
	binary.LittleEndian.PutUint16(b[17:19], flags)
	return append(b, body...)
}

// artificialRotate is the Rotate the server makes up for the dump stream: it names the
// file the next events belong to, and is in no file.
func artificialRotate(file string, pos uint64) *replication.BinlogEvent {
	body := binary.LittleEndian.AppendUint64(nil, pos)
	body = append(body, file...)
	return &replication.BinlogEvent{RawData: rawEvent(replication.ROTATE_EVENT, 0, 0x20, body),
		Event: &replication.RotateEvent{Position: pos, NextLogName: []byte(file)}}
}

// dump is what the server sends for file from its start: an artificial Rotate, the
// Format_description with log_pos 0 (re-checksummed, as the server sends the one that
// opens a dump), then every event as the file holds it.
func dump(t *testing.T, file []byte, name string) []*replication.BinlogEvent {
	t.Helper()
	evs := []*replication.BinlogEvent{artificialRotate(name, 4)}
	for off := int64(4); off < int64(len(file)); {
		e, err := binlog.SplitEvent(file[off:], off)
		if err != nil {
			t.Fatal(err)
		}
		raw := append([]byte(nil), e.Raw...)
		if off == 4 {
			binary.LittleEndian.PutUint32(raw[13:17], 0)
			binary.LittleEndian.PutUint32(raw[len(raw)-4:], crc32.ChecksumIEEE(raw[:len(raw)-4]))
		}
		evs = append(evs, &replication.BinlogEvent{RawData: raw})
		off = e.End
	}
	return evs
}

// stored is every byte the archive holds of file, in order, checking the segments tile it.
func stored(t *testing.T, a *binlog.Archive, file string) ([]byte, int) {
	t.Helper()
	segs, err := a.Segments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	n := 0
	for _, s := range segs {
		if s.File != file {
			continue
		}
		if s.Start != int64(len(out)) {
			t.Fatalf("%s: segment %s starts at %d, the bytes before end at %d", file, s.Key, s.Start, len(out))
		}
		b, err := a.Read(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		n++
	}
	return out, n
}

// innerPositionsZero is file as MariaDB 11.4 writes it (binlog_legacy_event_pos=OFF):
// the events inside a transaction say they end at 0, only a group's last event says
// where it ends.
func innerPositionsZero(t *testing.T, file []byte) []byte {
	t.Helper()
	out := append([]byte(nil), file...)
	zeroed := 0
	for off := int64(4); off < int64(len(out)); {
		e, err := binlog.SplitEvent(out[off:], off)
		if err != nil {
			t.Fatal(err)
		}
		next, err := binlog.SplitEvent(out[e.End:], e.End)
		inner := err == nil && e.Type != replication.MARIADB_GTID_EVENT && (next.Type == replication.XID_EVENT || next.Type == replication.TABLE_MAP_EVENT ||
			next.Type == replication.WRITE_ROWS_EVENTv1 || next.Type == replication.UPDATE_ROWS_EVENTv1 || next.Type == replication.DELETE_ROWS_EVENTv1)
		if inner {
			raw := out[off:e.End]
			binary.LittleEndian.PutUint32(raw[13:17], 0)
			binary.LittleEndian.PutUint32(raw[len(raw)-4:], crc32.ChecksumIEEE(raw[:len(raw)-4]))
			zeroed++
		}
		off = e.End
	}
	if zeroed == 0 {
		t.Fatal("the fixture has no transaction of several events")
	}
	return out
}

// TestFollowStoresFilesByteForByte: two files as the server's dump sends them (the
// first ends in a Rotate, the second in a Stop, and has 11.4's zero end positions
// inside its transactions) are stored byte for byte, the dump's
// Format_description put back as the file holds it, in segments merged into one per
// file; the stats count them; and a new run resumes after the last stored event.
func TestFollowStoresFilesByteForByte(t *testing.T) {
	ctx := context.Background()
	a := newArchive(t)
	r := newRun(t, a)
	if err := r.loadTip(ctx); err != nil {
		t.Fatal(err)
	}
	start, err := r.startPosition(ctx, nil, []serverLog{{name: "mysql-bin.000002"}, {name: "mysql-bin.000003"}})
	if err != nil || start != (binlog.Position{File: "mysql-bin.000002", Pos: 4}) {
		t.Fatalf("start of an empty archive = %v, %v; want the server's oldest file at 4", start, err)
	}
	f2, f3 := fixture(t, "mysql-bin.000002"), innerPositionsZero(t, fixture(t, "mysql-bin.000003"))
	s := &follower{run: r, cur: start, spare: make(chan []byte, 1),
		buf: make([]byte, 0, r.cfg.SegmentSize), merged: make([]byte, 0, r.cfg.MergeSize+r.cfg.SegmentSize)}
	evs := append(dump(t, f2, "mysql-bin.000002"), dump(t, f3, "mysql-bin.000003")...)
	hb := &replication.BinlogEvent{RawData: rawEvent(replication.HEARTBEAT_EVENT, 0, 0, []byte("mysql-bin.000003"))}
	evs = append(evs[:5], append([]*replication.BinlogEvent{hb}, evs[5:]...)...)
	for i, ev := range evs {
		if err := s.take(ctx, ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.merge(ctx)
	s.waitMerge()

	for _, c := range []struct {
		name string
		want []byte
	}{{"mysql-bin.000002", f2}, {"mysql-bin.000003", f3}} {
		got, n := stored(t, a, c.name)
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: the archive holds %d bytes that are not the file's %d", c.name, len(got), len(c.want))
		}
		if n != 1 {
			t.Errorf("%s: %d segments after the merge, want 1", c.name, n)
		}
	}
	if st := r.cfg.Stats; st.StoredBytes.Load() != int64(len(f2)+len(f3)) || st.Segments.Load() < 4 || st.LastEventTime.Load() == 0 {
		t.Errorf("stats: %d bytes in %d segments, last event at %d; want %d bytes in several segments",
			st.StoredBytes.Load(), st.Segments.Load(), st.LastEventTime.Load(), len(f2)+len(f3))
	}
	if tip := r.cfg.Stats.Tip(); tip == nil || tip.At != "mysql-bin.000003:"+strconv.Itoa(len(f3)) {
		t.Errorf("the status lines' tip is %+v, want the end of mysql-bin.000003", tip)
	}
	if r.stored != int64(len(f2)+len(f3)) {
		t.Errorf("the run counts %d bytes stored, want %d", r.stored, len(f2)+len(f3))
	}

	again := newRun(t, a)
	if err := again.loadTip(ctx); err != nil {
		t.Fatal(err)
	}
	want := binlog.Position{File: "mysql-bin.000003", Pos: int64(len(f3))}
	if again.tip.pos != want || !again.tip.complete || again.tip.last.Type != replication.STOP_EVENT {
		t.Fatalf("resumed tip %+v, want %v after its Stop event", again.tip, want)
	}
}

// TestTakeRefusals: an event that does not start where the archive ends, an encrypted
// binlog and a Rotate back to an earlier file are refused, the encryption for good.
func TestTakeRefusals(t *testing.T) {
	ctx := context.Background()
	f2 := fixture(t, "mysql-bin.000002")
	evs := dump(t, f2, "mysql-bin.000002")
	newFollower := func() *follower {
		r := newRun(t, newArchive(t))
		return &follower{run: r, cur: binlog.Position{File: "mysql-bin.000002", Pos: 4}, spare: make(chan []byte, 1)}
	}

	s := newFollower()
	for _, ev := range evs[:2] { // the Rotate and the Format_description
		if err := s.take(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.take(ctx, evs[3]); err == nil || !strings.Contains(err.Error(), "not storing a gap or an overlap") {
		t.Errorf("an event past the next one = %v, want a refusal", err)
	}

	enc := &replication.BinlogEvent{RawData: rawEvent(replication.MARIADB_START_ENCRYPTION_EVENT, 200, 0, make([]byte, 17))}
	if err := newFollower().take(ctx, enc); err == nil || !backoff.IsPermanent(err) || !strings.Contains(err.Error(), "encrypt") {
		t.Errorf("an encrypted binlog = %v, want a permanent refusal", err)
	}

	if err := newFollower().take(ctx, artificialRotate("mysql-bin.000001", 4)); err == nil || !strings.Contains(err.Error(), "not to the start of a later file") {
		t.Errorf("a Rotate back to an earlier file = %v, want a refusal", err)
	}
	if err := newFollower().take(ctx, artificialRotate("../etc/passwd", 4)); err == nil || !backoff.IsPermanent(err) {
		t.Errorf("a Rotate to a bad file name = %v, want a permanent refusal", err)
	}
}

// TestStartPositionAfterTheArchive: where a session starts on a server that no longer
// has the archive's last file: the next file when the archive's ends complete (no gap),
// else the first later file with a gap recorded and counted; a server whose files all
// come before the archive's is refused for good.
func TestStartPositionAfterTheArchive(t *testing.T) {
	ctx := context.Background()
	at := binlog.Position{File: "mysql-bin.000003", Pos: 4648}
	for _, c := range []struct {
		name     string
		complete bool
		logs     []string
		want     string
		gap      bool
	}{
		{"the next file after a complete one", true, []string{"mysql-bin.000004", "mysql-bin.000005"}, "mysql-bin.000004", false},
		{"the next file after an incomplete one", false, []string{"mysql-bin.000004"}, "mysql-bin.000004", true},
		{"a file skipped", true, []string{"mysql-bin.000005", "mysql-bin.000006"}, "mysql-bin.000005", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newArchive(t)
			r := newRun(t, a)
			r.tip = tip{pos: at, complete: c.complete}
			var logs []serverLog
			for _, l := range c.logs {
				logs = append(logs, serverLog{name: l, size: 1000})
			}
			got, err := r.startPosition(ctx, nil, logs)
			if err != nil || got != (binlog.Position{File: c.want, Pos: 4}) {
				t.Fatalf("start = %v, %v; want %s at 4", got, err, c.want)
			}
			gaps, err := a.Gaps(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.gap != (len(gaps) == 1) || c.gap != (r.cfg.Stats.Gaps.Load() == 1) {
				t.Fatalf("gaps recorded %v, counted %d; want a gap: %v", gaps, r.cfg.Stats.Gaps.Load(), c.gap)
			}
			if c.gap && (gaps[0].After != at || gaps[0].Resumed != got) {
				t.Errorf("gap %+v, want after %v, resumed at %v", gaps[0], at, got)
			}
		})
	}
	r := newRun(t, newArchive(t))
	r.tip = tip{pos: at, complete: true}
	_, err := r.startPosition(ctx, nil, []serverLog{{name: "mysql-bin.000001"}, {name: "mysql-bin.000002"}})
	if err == nil || !backoff.IsPermanent(err) || !strings.Contains(err.Error(), "another repository") {
		t.Errorf("a server whose files all come before the archive's = %v, want a permanent refusal", err)
	}
}

// TestConfigDefaults: unset settings take the defaults; a negative one is refused.
func TestConfigDefaults(t *testing.T) {
	var c Config
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	if c.FlushInterval != DefaultFlushInterval || c.SegmentSize != DefaultSegmentSize || c.MergeSize != DefaultMergeSize ||
		c.MergeEvery != DefaultMergeEvery || c.Heartbeat != DefaultHeartbeat || c.RetryMax != DefaultRetryMax || c.Log == nil {
		t.Errorf("defaults: %+v", c)
	}
	c = Config{FlushInterval: 2 * time.Second}
	c.defaults()
	if c.FlushInterval != 2*time.Second {
		t.Errorf("a set FlushInterval became %v", c.FlushInterval)
	}
	if err := (&Config{Heartbeat: -time.Second}).defaults(); err == nil {
		t.Error("a negative heartbeat was accepted")
	}
}
