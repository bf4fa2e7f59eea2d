package redo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fakeServer writes a synthetic circular redo log and reports its LSNs. It
// appends a chunk of mini-transactions on every LSNs call, so the log grows
// while the tailer reads it (from the tailer's goroutine: no races).
type fakeServer struct {
	t      *testing.T
	f      *os.File
	g      ring
	lsn    uint64 // end of the written log
	total  uint64 // stop writing at this LSN
	chunk  int    // bytes per LSNs call
	burst  int    // on this call number write 2*capacity at once (lap)
	calls  int
	rng    *rand.Rand
	stream []byte // everything written since the checkpoint, sequence bytes 1
	starts []uint64
	ops    []FileOp
	// afterWrite, if set, runs at the end of each LSNs call with the
	// written LSN before the call.
	afterWrite func(prev uint64)
}

// newFakeServer creates ib_logfile0 in dir with the given capacity and a
// checkpoint at first+startOff.
func newFakeServer(t *testing.T, capacity int, first, startOff uint64) (*fakeServer, string) {
	path := filepath.Join(t.TempDir(), "ib_logfile0")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cp := Checkpoint{LSN: first + startOff, EndLSN: first + startOff}
	head := BackupHeader(Header{Format: FormatPhys}, cp, "x")
	binary.BigEndian.PutUint64(head[8:], first)
	copy(head[creatorOff:], "MariaDB fake\x00\x00")
	binary.BigEndian.PutUint32(head[hdrCRCOff:], crc32c(head[:hdrCRCOff]))
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(StartOffset + capacity)); err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, f: f, g: ring{first: first, capacity: uint64(capacity)}, lsn: cp.LSN,
		chunk: 100 << 10, rng: rand.New(rand.NewPCG(1, 2))}
	return s, path
}

// LSNs implements ServerLSN.
func (s *fakeServer) LSNs(context.Context) (uint64, uint64, error) {
	s.calls++
	n := s.chunk
	if s.calls == s.burst {
		n = 2 * int(s.g.capacity)
	}
	prev := s.lsn
	for end := s.lsn + uint64(n); s.lsn < min(end, s.total); {
		s.writeMtr()
	}
	if s.afterWrite != nil {
		s.afterWrite(prev)
	}
	return s.lsn, s.lsn, nil
}

// writeMtr appends one mini-transaction at s.lsn.
func (s *fakeServer) writeMtr() {
	var recs []byte
	if len(s.starts)%13 == 5 {
		op := FileOp{Kind: FileCreate, SpaceID: uint32(len(s.starts)), Name: "./db/t.ibd", LSN: s.lsn}
		recs = fileRecord(recFileCreate, op.SpaceID, op.Name)
		s.ops = append(s.ops, op)
	}
	for range 1 + s.rng.IntN(4) {
		recs = append(recs, writeRecord(uint32(s.rng.IntN(100)+1), uint32(s.rng.IntN(1000)), s.rng.IntN(2000))...)
	}
	m := frame(recs, s.g.seqBit(s.lsn+uint64(len(recs))), nil)
	s.starts = append(s.starts, s.lsn)
	s.put(m)
	m[len(recs)] = 1
	s.stream = append(s.stream, m...)
	s.lsn += uint64(len(m))
}

// put writes b at the ring position of s.lsn, wrapping at the end.
func (s *fakeServer) put(b []byte) {
	for lsn := s.lsn; len(b) > 0; {
		off := s.g.offset(lsn)
		n := min(len(b), int(int64(StartOffset)+int64(s.g.capacity)-off))
		if _, err := s.f.WriteAt(b[:n], off); err != nil {
			s.t.Fatal(err)
		}
		b, lsn = b[n:], lsn+uint64(n)
	}
}

func TestTailerSyntheticWraps(t *testing.T) {
	const capacity = 1 << 20
	srv, path := newFakeServer(t, capacity, 50000, 900000) // starts near the end of the ring
	srv.total = srv.lsn + 4*capacity
	var out bytes.Buffer
	var ops []FileOp
	tl, err := Open(Config{Path: path, Out: &out, Server: srv, Creator: "Backup test",
		OnFileOp: func(op FileOp) { ops = append(ops, op) }, Poll: time.Millisecond, ReadSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := tl.Start().LSN
	// Once all is written, stop one byte into a mini-transaction the tailer
	// has not seen yet: it is copied, the next one is not.
	k := -1
	srv.afterWrite = func(prev uint64) {
		if srv.lsn < srv.total || k >= 0 {
			return
		}
		for k = len(srv.starts) - 3; srv.starts[k-1] > prev; k-- {
		}
		tl.StopAt(srv.starts[k] + 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tl.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	end := srv.starts[k+1]
	if tl.EndLSN() != end || tl.Copied() != end {
		t.Fatalf("EndLSN %d, Copied %d, want %d", tl.EndLSN(), tl.Copied(), end)
	}
	want := append(BackupHeader(tl.Header(), tl.Start(), "Backup test"), srv.stream[:end-a]...)
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("output differs from the written stream (%d vs %d bytes)", out.Len(), len(want))
	}
	ll, err := VerifyLinear(out.Bytes(), nil, "")
	if err != nil || ll.EndLSN != end || ll.MTRs != k+1 {
		t.Fatalf("VerifyLinear: %+v, %v", ll, err)
	}
	var wantOps []FileOp
	for _, op := range srv.ops {
		if op.LSN < end {
			wantOps = append(wantOps, op)
		}
	}
	if len(ops) != len(wantOps) || len(ops) < 20 {
		t.Fatalf("%d file ops reported, want %d", len(ops), len(wantOps))
	}
	for i := range ops {
		if ops[i] != wantOps[i] {
			t.Fatalf("op %d = %+v, want %+v", i, ops[i], wantOps[i])
		}
	}
	if err := tl.WaitCopied(ctx, end); err != nil {
		t.Errorf("WaitCopied after the end: %v", err)
	}
	if err := tl.WaitCopied(ctx, end+1); err == nil {
		t.Error("WaitCopied beyond the end LSN returned nil")
	}
}

func TestTailerSyntheticLap(t *testing.T) {
	const capacity = 1 << 20
	srv, path := newFakeServer(t, capacity, 50000, 0)
	srv.total, srv.burst = 1<<40, 3
	tl, err := Open(Config{Path: path, Out: new(bytes.Buffer), Server: srv, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = tl.Run(ctx)
	var ow *OverwrittenError
	if !errors.As(err, &ow) || !errors.Is(err, ErrLogOverwritten) || ow.Capacity != capacity || ow.Copied != tl.Copied() {
		t.Fatalf("Run = %v, want *OverwrittenError", err)
	}
	if werr := tl.WaitCopied(ctx, 1<<50); !errors.As(werr, &ow) {
		t.Errorf("WaitCopied = %v, want Run's error", werr)
	}
}

func TestTailerSyntheticCorrupt(t *testing.T) {
	srv, path := newFakeServer(t, 1<<20, 50000, 0)
	srv.total = srv.lsn + 300000
	for range 5 {
		srv.writeMtr()
	}
	bad := srv.starts[3]
	if _, err := srv.f.WriteAt([]byte{0x37}, srv.g.offset(bad)+2); err != nil {
		t.Fatal(err)
	}
	tl, err := Open(Config{Path: path, Out: new(bytes.Buffer), Server: srv, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = tl.Run(context.Background())
	if !errors.Is(err, ErrCorrupt) || tl.Copied() != bad {
		t.Fatalf("Run = %v (copied %d), want ErrCorrupt at %d", err, tl.Copied(), bad)
	}
	t.Log(err)
}

func TestTailerCancel(t *testing.T) {
	srv, path := newFakeServer(t, 1<<20, 50000, 0)
	tl, err := Open(Config{Path: path, Out: new(bytes.Buffer), Server: srv})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := tl.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want deadline exceeded", err)
	}
}

// resizeTo replaces the log at path like an online resize: a new file with
// the given capacity whose first LSN is the current end, renamed over path.
func (s *fakeServer) resizeTo(path string, capacity int) {
	tmp := path + ".101"
	f, err := os.Create(tmp)
	if err != nil {
		s.t.Fatal(err)
	}
	cp := Checkpoint{LSN: s.lsn, EndLSN: s.lsn}
	head := BackupHeader(Header{Format: FormatPhys}, cp, "x")
	if _, err := f.Write(head); err != nil {
		s.t.Fatal(err)
	}
	if err := f.Truncate(int64(StartOffset + capacity)); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		s.t.Fatal(err)
	}
	s.f.Close()
	s.f, s.g = f, ring{first: s.lsn, capacity: uint64(capacity)}
}

func TestTailerSyntheticResize(t *testing.T) {
	srv, path := newFakeServer(t, 4<<20, 50000, 500000)
	srv.total = srv.lsn + 6<<20
	var out bytes.Buffer
	tl, err := Open(Config{Path: path, Out: &out, Server: srv, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.afterWrite = func(uint64) {
		switch {
		case srv.calls == 3:
			srv.chunk = 3 << 20 // more than one read: the tailer lags when it sees the resize
		case srv.calls == 4:
			srv.resizeTo(path, 3<<19) // the tailer must drain the old file first
			srv.chunk = 100 << 10
		case srv.lsn >= srv.total:
			tl.StopAt(srv.lsn)
		}
	}
	if err := tl.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if tl.log.ring.capacity != 3<<19 || tl.EndLSN() != srv.lsn {
		t.Fatalf("capacity %d, end %d; want %d, %d", tl.log.ring.capacity, tl.EndLSN(), 3<<19, srv.lsn)
	}
	want := append(BackupHeader(tl.Header(), tl.Start(), ""), srv.stream...)
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatal("output differs from the written stream")
	}
}

func TestReadLSNDirectAndBuffered(t *testing.T) {
	srv, path := newFakeServer(t, 1<<20, 50000, 1<<20-5000)
	srv.total = srv.lsn + 300000
	srv.LSNs(context.Background())
	for _, direct := range []bool{true, false} {
		l, err := openLog(path)
		if err != nil {
			t.Fatal(err)
		}
		if !direct {
			if err := l.reopenBuffered(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("direct=%v", l.direct)
		buf := alignedBuf(300000 + 2*align)
		for _, skip := range []int{0, 1, 4095, 4096, 4999, 5000, 5001, 70000} {
			lsn := srv.starts[0] + uint64(skip)
			got, err := l.readLSN(buf, lsn, 100000)
			if err != nil || !bytes.Equal(got, srv.rawAt(lsn, 100000)) {
				t.Fatalf("direct=%v readLSN(+%d): %v / data differs", direct, skip, err)
			}
		}
		l.close()
	}
}

// rawAt returns n bytes of the log at lsn as in the file (sequence bytes as written).
func (s *fakeServer) rawAt(lsn uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if _, err := s.f.ReadAt(b[i:i+1], s.g.offset(lsn+uint64(i))); err != nil {
			s.t.Fatal(err)
		}
	}
	return b
}
