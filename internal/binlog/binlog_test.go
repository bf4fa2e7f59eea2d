package binlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/go-mysql-org/go-mysql/replication"
)

// The fixtures are binlog files of MariaDB 10.11.19 (ROW format, CRC32 checksums):
// 000001 holds 0-1-1 and 0-1-2 (DDL), 0-1-3 (an insert, ending at 875) and a Stop
// event; 000002 holds 0-1-4 to 0-1-23 and ends with a Rotate; 000003 holds 0-1-24 to
// 0-1-43 and a Stop event.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eventEnds lists the offsets at which the events of a binlog file end.
func eventEnds(t testing.TB, file []byte) []int64 {
	t.Helper()
	var ends []int64
	for off := int64(4); off < int64(len(file)); {
		e, err := SplitEvent(file[off:], off)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, e.End)
		off = e.End
	}
	return ends
}

// newArchive is an archive in a temporary directory, zstd-compressed and encrypted.
func newArchive(t testing.TB) (*Archive, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.Open(context.Background(), storage.Config{URL: dir})
	if err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(st, Options{Compression: codec.Zstd, Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}})
	if err != nil {
		t.Fatal(err)
	}
	return a, dir
}

// store puts a fixture file into the archive in segments of about n events, as the
// archiver stores what arrives.
func store(t testing.TB, a *Archive, name string, n int) {
	t.Helper()
	b := fixture(t, name)
	ends := eventEnds(t, b)
	start := int64(0)
	for i := n - 1; ; i += n {
		end := ends[min(i, len(ends)-1)]
		if _, err := a.Put(context.Background(), name, start, b[start:end]); err != nil {
			t.Fatal(err)
		}
		start = end
		if i >= len(ends)-1 {
			return
		}
	}
}

func TestSegmentKeys(t *testing.T) {
	key := segmentKey("mysql-bin.000012", 4096, 8192, 0xdeadbeef, codec.Zstd, true)
	if key != "binlogs/mysql-bin.000012/000000004096-000000008192.deadbeef.zst.age" {
		t.Fatalf("key %s", key)
	}
	s, err := parseSegmentKey(key, 77)
	if err != nil || s.File != "mysql-bin.000012" || s.Start != 4096 || s.End != 8192 || s.CRC != 0xdeadbeef ||
		s.Comp != codec.Zstd || !s.Encrypted || s.StoredSize != 77 {
		t.Fatalf("parsed %+v, %v", s, err)
	}
	for _, bad := range []string{
		"binlogs/../x.000001/000000000000-000000000010.00000000",
		"binlogs/mysql-bin/000000000000-000000000010.00000000",
		"binlogs/mysql-bin.000001/000000000010-000000000010.00000000",
		"binlogs/mysql-bin.000001/00000000000a-000000000010.00000000",
		"binlogs/mysql-bin.000001/000000000000-000000000010.0000000",
		"binlogs/mysql-bin.000001/000000000000-999999999999.00000000",
		"binlogs/mysql-bin.000001",
	} {
		if _, err := parseSegmentKey(bad, 1); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if CompareFiles("mysql-bin.000009", "mysql-bin.000010") >= 0 || CompareFiles("a.999999", "a.1000000") >= 0 {
		t.Error("files are not ordered by number")
	}
	if got := (Position{File: "mysql-bin.000009"}).Next(); got.File != "mysql-bin.000010" || got.Pos != 4 {
		t.Errorf("next of 000009: %v", got)
	}
}

func TestArchiveRoundTripAndDamage(t *testing.T) {
	a, dir := newArchive(t)
	store(t, a, "mysql-bin.000002", 7)
	segs, err := a.Segments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, s := range segs {
		b, err := a.Read(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, fixture(t, "mysql-bin.000002")) {
		t.Fatal("the archive does not give back the file")
	}
	if err := ByFile(segs)[0].Contiguous(); err != nil {
		t.Fatal(err)
	}
	// A flipped byte of a stored segment is caught (by age's authentication here).
	path := filepath.Join(dir, filepath.FromSlash(segs[1].Key))
	b, _ := os.ReadFile(path)
	b[len(b)-20] ^= 1
	os.WriteFile(path, b, 0o600)
	if _, err := a.Read(context.Background(), segs[1]); err == nil {
		t.Fatal("a damaged segment was read")
	}
	// Without the identity, an encrypted archive says so.
	plain, _ := Open(a.st, Options{})
	if _, err := plain.Read(context.Background(), segs[0]); !errors.Is(err, codec.ErrNoIdentity) {
		t.Fatalf("read without identity: %v", err)
	}
}

func TestContiguous(t *testing.T) {
	f := FileSegments{File: "b.000001", Segs: []Segment{{Start: 0, End: 10}, {Start: 12, End: 20}}}
	if err := f.Contiguous(); err == nil || !strings.Contains(err.Error(), "hole") {
		t.Errorf("hole: %v", err)
	}
	f.Segs[1].Start = 8
	if err := f.Contiguous(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("overlap: %v", err)
	}
	f.Segs = []Segment{{Start: 4, End: 10}}
	if err := f.Contiguous(); err == nil {
		t.Error("a file not archived from its first byte passed")
	}
}

func gtid(t testing.TB, s string) *GTID {
	g, err := ParseGTID(s)
	if err != nil {
		t.Fatal(err)
	}
	return &g
}

func TestPlanReplayToGTID(t *testing.T) {
	a, _ := newArchive(t)
	for _, f := range []string{"mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"} {
		store(t, a, f, 5)
	}
	relay := t.TempDir()
	state, _ := ParseState("0-1-3")
	p, err := a.PlanReplay(context.Background(), Position{"mysql-bin.000001", 875}, state, Target{GTID: gtid(t, "0-1-30")}, relay)
	if err != nil {
		t.Fatal(err)
	}
	if p.Groups != 27 || p.Last.GTID.String() != "0-1-30" || p.State.String() != "0-1-30" || len(p.RelayFiles) != 3 {
		t.Fatalf("plan: %d groups, last %v, state %s, %d relay logs", p.Groups, p.Last.GTID, p.State, len(p.RelayFiles))
	}
	// 0-1-30's XID event ends at 1869 in 000003 (mariadb-binlog shows "at 1869" next).
	if p.Until != (Position{"mysql-bin.000003", 1869}) {
		t.Fatalf("until %v", p.Until)
	}
	// A relay log: magic, the file's Format_description, an artificial Rotate naming the
	// source file and where its events start, then those events.
	b, _ := os.ReadFile(p.RelayFiles[0])
	src := fixture(t, "mysql-bin.000001")
	if !bytes.Equal(b[:p.RelayPos], src[:256]) || p.RelayPos != 256 {
		t.Fatalf("relay log does not start with the file's Format_description (pos %d)", p.RelayPos)
	}
	rot, err := SplitEvent(b[p.RelayPos:], p.RelayPos)
	if err != nil || rot.Type != replication.ROTATE_EVENT || !rot.Artificial() {
		t.Fatalf("no artificial Rotate after it: %+v %v", rot, err)
	}
	parser := replication.NewBinlogParser()
	parser.SetVerifyChecksum(true)
	if _, err := parser.Parse(src[4:256]); err != nil {
		t.Fatal(err)
	}
	ev, err := parser.Parse(rot.Raw)
	if err != nil {
		t.Fatalf("the Rotate event does not pass its checksum: %v", err)
	}
	if r := ev.Event.(*replication.RotateEvent); string(r.NextLogName) != "mysql-bin.000001" || r.Position != 875 {
		t.Fatalf("rotate names %s:%d", r.NextLogName, r.Position)
	}
	if !bytes.Equal(b[rot.End:], src[875:]) {
		t.Fatal("the relay log does not carry the file's events from the backup's position")
	}
	idx, _ := os.ReadFile(p.RelayIndex)
	if strings.Count(string(idx), "\n") != 3 {
		t.Fatalf("relay index:\n%s", idx)
	}
}

func TestPlanReplayRefusals(t *testing.T) {
	ctx := context.Background()
	a, _ := newArchive(t)
	for _, f := range []string{"mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"} {
		store(t, a, f, 9)
	}
	from, state := Position{"mysql-bin.000001", 875}, State{{0, 1}: 3}
	// Every transaction after the backup is stamped 18:52:36: a time before it applies
	// nothing; a time at or after it cannot tell what came later.
	p, err := a.PlanReplay(ctx, from, state, Target{Time: time.Date(2026, 11, 25, 18, 52, 35, 0, time.UTC)}, t.TempDir())
	if err != nil || p.Groups != 0 || p.Until != from {
		t.Fatalf("time before the first transaction: %v %+v", err, p)
	}
	_, err = a.PlanReplay(ctx, from, state, Target{Time: time.Date(2026, 11, 25, 18, 52, 36, 0, time.UTC)}, t.TempDir())
	if !errors.Is(err, ErrNotInArchive) || !strings.Contains(err.Error(), "0-1-43") {
		t.Fatalf("time at the archive's end: %v", err)
	}
	if _, err = a.PlanReplay(ctx, from, state, Target{GTID: gtid(t, "0-1-99")}, t.TempDir()); !errors.Is(err, ErrNotInArchive) {
		t.Fatalf("GTID past the archive: %v", err)
	}
	if _, err = a.PlanReplay(ctx, from, state, Target{GTID: gtid(t, "0-2-30")}, t.TempDir()); !errors.Is(err, ErrNotInArchive) {
		t.Fatalf("GTID of another server: %v", err)
	}
	if _, err = a.PlanReplay(ctx, Position{"mysql-bin.000009", 4}, state, Target{GTID: gtid(t, "0-1-30")}, t.TempDir()); !errors.Is(err, ErrNotInArchive) {
		t.Fatalf("backup position not archived: %v", err)
	}
	if _, err = a.PlanReplay(ctx, Position{"mysql-bin.000001", 876}, state, Target{GTID: gtid(t, "0-1-30")}, t.TempDir()); err == nil {
		t.Fatal("a position inside an event was accepted")
	}
}

// TestGapRefusedAndVerified: without 000002 the archive jumps from 0-1-3 to a file that
// began at 0-1-23: a restore across is refused, verify reports it until a gap record
// says so.
func TestGapRefusedAndVerified(t *testing.T) {
	ctx := context.Background()
	a, _ := newArchive(t)
	store(t, a, "mysql-bin.000001", 4)
	store(t, a, "mysql-bin.000003", 4)
	_, err := a.PlanReplay(ctx, Position{"mysql-bin.000001", 875}, State{{0, 1}: 3}, Target{GTID: gtid(t, "0-1-30")}, t.TempDir())
	if !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), "0-1-23") {
		t.Fatalf("restore across a gap: %v", err)
	}
	s, err := a.Verify(ctx)
	if err != nil || len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "no gap recorded") {
		t.Fatalf("verify: %v %q", err, s.Problems)
	}
	g := Gap{After: Position{"mysql-bin.000001", 898}, Resumed: Position{"mysql-bin.000003", 4}, Detected: time.Now(), Reason: "purged"}
	if err := a.RecordGap(ctx, g); err != nil {
		t.Fatal(err)
	}
	s, err = a.Verify(ctx)
	if err != nil || len(s.Problems) != 0 || len(s.Gaps) != 1 || s.Groups != 23 || s.LastGroup.GTID.String() != "0-1-43" {
		t.Fatalf("verify with the gap recorded: %v %+v", err, s)
	}
	sum, err := a.Summarize(ctx)
	if err != nil || sum.Files != 2 || sum.LastGroup.GTID.String() != "0-1-43" || sum.End != (Position{"mysql-bin.000003", 4648}) {
		t.Fatalf("summary: %v %+v", err, sum)
	}
}

func TestStateAndGTID(t *testing.T) {
	s, err := ParseState("0-1-10, 0-2-12,7-1-3")
	if err != nil || s.String() != "0-1-10,0-2-12,7-1-3" {
		t.Fatalf("%v %s", err, s)
	}
	if n, ok := s.DomainSeq(0); !ok || n != 12 {
		t.Errorf("domain 0: %d", n)
	}
	for _, bad := range []string{"1-2", "a-b-c", "1-2-3-4", "-1-2-3", "4294967296-1-1"} {
		if _, err := ParseGTID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzEvents feeds arbitrary bytes to the event splitter and decoders after a real
// Format_description: errors, never a panic.
func FuzzEvents(f *testing.F) {
	file := fixture(f, "mysql-bin.000002")
	f.Add(file[256:400])
	f.Add(file[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		fde, _ := SplitEvent(file[4:], 4)
		d, err := NewDecoder(fde)
		if err != nil {
			t.Fatal(err)
		}
		tr := &Tracker{state: State{}}
		_, _ = eventsOf(d, "x.000001", b, 4, 4, func(d *Decoder, e Event) (bool, error) {
			d.GTID(e)
			d.GTIDList(e)
			d.Ends(e)
			_, _, err := tr.Step(d, "x.000001", e)
			return false, err
		})
		// Decoding without the checksum check, as a corrupt but checksummed event would.
		for off := 0; off < len(b); {
			e, err := SplitEvent(b[off:], int64(off))
			if err != nil {
				return
			}
			d.GTID(e)
			d.GTIDList(e)
			d.Ends(e)
			off += len(e.Raw)
		}
	})
}

// TestMergedSegments: a merged segment and the small ones it holds may both be stored
// for a moment (an archiver stopped between the two); readers take the merged one.
func TestMergedSegments(t *testing.T) {
	ctx := context.Background()
	a, _ := newArchive(t)
	store(t, a, "mysql-bin.000002", 3)
	small, _ := a.Segments(ctx)
	b := fixture(t, "mysql-bin.000002")
	if _, err := a.Put(ctx, "mysql-bin.000002", 0, b[:small[2].End]); err != nil {
		t.Fatal(err)
	}
	segs, _ := a.Segments(ctx)
	covered, _ := a.Covered(ctx)
	if len(segs) != len(small)-2 || segs[0].End != small[2].End || len(covered) != 3 {
		t.Fatalf("%d segments (first ends at %d), %d covered; %d small", len(segs), segs[0].End, len(covered), len(small))
	}
	if err := ByFile(segs)[0].Contiguous(); err != nil {
		t.Fatal(err)
	}
	s, err := a.Verify(ctx)
	if err != nil || len(s.Problems) != 0 || s.Groups != 20 {
		t.Fatalf("verify: %v %+v", err, s.Problems)
	}
}
