package mysqlredo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/redo"
)

const (
	testFileSize        = HeaderSize + 64*BlockSize // 32 KiB of log per file
	testStart    uint64 = 1 << 20
	testCP       uint64 = testStart + 5000 // a data LSN in the first file's 10th block
	testCreator         = "xtrabkup ferry-test"
)

// openFake opens a Tailer on s writing to a new buffer.
func openFake(t *testing.T, s *fakeServer) (*Tailer, *bytes.Buffer) {
	t.Helper()
	out := new(bytes.Buffer)
	tl, err := Open(Config{Dir: s.dir, Out: out, Server: s, Creator: testCreator, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return tl, out
}

// stopWhenWritten makes the fake stop writing at total and then calls StopAt(e(total)).
func stopWhenWritten(s *fakeServer, tl *Tailer, total uint64, e func(uint64) uint64) {
	s.total = total
	s.afterWrite = func() {
		if s.lsn >= s.total {
			tl.StopAt(e(s.lsn))
		}
	}
}

func run(t *testing.T, tl *Tailer) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return tl.Run(ctx)
}

func TestTailerFollowsRecycledFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		back int // the stop LSN is this many data bytes before the end of the written log
	}{{"stop at the end", 0}, {"stop in an earlier file", 40000}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer(t, testFileSize, testStart, testCP)
			s.keep, s.chunk = 4, 5000
			tl, out := openFake(t, s)
			total := advanceLSN(testCP, 300000) // ~10 files of 32 KiB, each reused
			var e uint64
			stopWhenWritten(s, tl, total, func(end uint64) uint64 {
				e = end - uint64(tc.back)
				if validDataLSN(e) != nil {
					e += blockHdrSize
				}
				return e
			})
			if err := run(t, tl); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tl.Start().LSN != testCP || tl.EndLSN() != e || tl.Copied() < e {
				t.Fatalf("start %d, end %d, copied %d; want %d, %d, >= %d", tl.Start().LSN, tl.EndLSN(), tl.Copied(), testCP, e, e)
			}
			if len(s.spares) == 0 || s.nextID < 8 {
				t.Fatalf("the fake recycled no file (%d files made)", s.nextID)
			}
			checkOutput(t, out.Bytes(), tl, e, s.lsn)
		})
	}
}

// checkOutput compares a copy with what the fake wrote and scans it.
func checkOutput(t *testing.T, got []byte, tl *Tailer, e, written uint64) {
	t.Helper()
	want := wantLog(tl.Header(), tl.Start().LSN, e, written, testCreator)
	if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("copy differs from the written log (%d bytes, want %d)", len(got), len(want))
	}
	if (len(got)-HeaderSize)%BlockSize != 0 {
		t.Fatalf("copy of %d bytes is not header + whole blocks", len(got))
	}
	start, end, err := ScanReader(bytes.NewReader(got), int64(len(got)))
	if err != nil || start != tl.Start().LSN || end < e {
		t.Fatalf("ScanReader = %d, %d, %v; want %d, >= %d", start, end, err, tl.Start().LSN, e)
	}
	h, err := ParseHeader(got)
	if err != nil || h.Creator != testCreator || h.Flags != 0 || h.StartLSN != tl.Header().StartLSN {
		t.Fatalf("copy header %+v, %v", h, err)
	}
}

func TestTailerFinalPartialBlockWrittenOnce(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	tl, out := openFake(t, s)
	total := advanceLSN(testCP, 20000)
	if total%BlockSize == blockHdrSize {
		total++
	}
	stopWhenWritten(s, tl, total, func(end uint64) uint64 { return end })
	if err := run(t, tl); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutput(t, out.Bytes(), tl, total, total)
	blocks := (out.Len() - HeaderSize) / BlockSize
	if want := int(total/BlockSize-testCP/BlockSize) + 1; blocks != want {
		t.Fatalf("%d blocks copied, want %d", blocks, want)
	}
	last := out.Bytes()[out.Len()-BlockSize:]
	if dl := int(binary.BigEndian.Uint16(last[4:])); dl != int(total%BlockSize) {
		t.Fatalf("last block data_len %d, want %d", dl, total%BlockSize)
	}
	if tl.Copied() != total {
		t.Fatalf("Copied %d, want %d", tl.Copied(), total)
	}
}

func TestTailerEmptyFinalBlock(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	tl, out := openFake(t, s)
	s.total = advanceLSN(testCP, 20000) // still in the first file
	var e uint64
	s.afterWrite = func() {
		if s.lsn >= s.total && e == 0 {
			// The server filled the current block and flushed the first data
			// byte of the next one, which is not on disk yet.
			bs := s.lsn / BlockSize * BlockSize
			s.writeBlock(fakeBlock(bs, bs+BlockSize), bs)
			e = bs + BlockSize + blockHdrSize
			s.lie, s.lieCalls = e-s.lsn, 1<<30
			tl.StopAt(e)
		}
	}
	if err := run(t, tl); err != nil {
		t.Fatalf("Run: %v", err)
	}
	last := out.Bytes()[out.Len()-BlockSize:]
	if !bytes.Equal(last, emptyBlock(e/BlockSize*BlockSize)) || tl.EndLSN() != e || tl.Copied() != e {
		t.Fatalf("last block not the empty block of %d (end %d, copied %d)", e, tl.EndLSN(), tl.Copied())
	}
	if _, end, err := ScanReader(bytes.NewReader(out.Bytes()), int64(out.Len())); err != nil || end != e {
		t.Fatalf("ScanReader: end %d, %v", end, err)
	}
}

func TestTailerStaleBlocksAreCaughtUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls int
		ok    bool
	}{{"once", 1, true}, {"persistent", 1 << 30, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer(t, testFileSize, testStart, testCP)
			s.keep, s.chunk = 3, 3000
			tl, _ := openFake(t, s)
			total := advanceLSN(testCP, 400000)
			var e uint64
			lied := false
			s.afterWrite = func() {
				cur := s.files[len(s.files)-1]
				if !lied && s.nextID >= 6 && s.lsn+4*BlockSize < cur.EndLSN {
					// The current file is a reused one: past the written end it holds
					// the old blocks of its previous use. Complete the current block
					// and report two of those old blocks as flushed.
					lied = true
					bs := s.lsn / BlockSize * BlockSize
					s.writeBlock(fakeBlock(bs, bs+BlockSize), bs)
					s.lie, s.lieCalls = bs+3*BlockSize+blockHdrSize-s.lsn, tc.calls
					if !tc.ok {
						s.total = s.lsn
					}
				}
				if s.lsn >= total && e == 0 {
					e = s.lsn
					tl.StopAt(e)
				}
			}
			s.total = total
			err := run(t, tl)
			if !lied {
				t.Fatal("the fake reused no file")
			}
			if tc.ok {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "recycled file") {
				t.Fatalf("Run = %v, want ErrCorrupt for an old block", err)
			}
			t.Log(err)
		})
	}
}

func TestTailerNewerBlockIsLapped(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	s.chunk = 2000
	tl, _ := openFake(t, s)
	s.afterWrite = func() {
		if s.calls == 5 { // a newer block where the copy is about to read
			bs := s.lsn/BlockSize*BlockSize - 2*BlockSize
			s.writeBlock(fakeBlock(bs+1<<30, bs+1<<30+BlockSize), bs)
			s.total = s.lsn
		}
	}
	err := run(t, tl)
	checkLapped(t, err, tl, "newer block")
}

// checkLapped asserts that err is an *OverwrittenError that code written for the
// MariaDB tailer recognises, whose message contains detail.
func checkLapped(t *testing.T, err error, tl *Tailer, detail string) {
	t.Helper()
	var ow *OverwrittenError
	var mow *redo.OverwrittenError
	if !errors.As(err, &ow) || !errors.Is(err, redo.ErrLogOverwritten) || !errors.As(err, &mow) {
		t.Fatalf("Run = %v, want *OverwrittenError", err)
	}
	if ow.Copied != tl.Copied() || mow.Copied != tl.Copied() || !strings.Contains(err.Error(), detail) {
		t.Fatalf("error %v: copied %d/%d, want %d and %q", err, ow.Copied, mow.Copied, tl.Copied(), detail)
	}
	if werr := tl.WaitCopied(context.Background(), 1<<62); !errors.As(werr, &ow) {
		t.Errorf("WaitCopied = %v, want Run's error", werr)
	}
	t.Log(err)
}

func TestTailerLappedByBurst(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	s.keep, s.chunk = 3, 2000
	s.burst, s.burstLen = 4, 10*testFileSize // the files the copy reads are consumed and reused
	tl, _ := openFake(t, s)
	checkLapped(t, run(t, tl), tl, "")
}

// TestTailerFollowsArchive: a burst that consumes and reuses the files (it laps a
// copy of the files, TestTailerLappedByBurst) does not lap a copy that follows the
// server's archive, whether the archive starts at the checkpoint's block or later;
// the copy ends with the partial block the archive's flush wrote.
func TestTailerFollowsArchive(t *testing.T) {
	for _, later := range []int{0, 3000} {
		s := newFakeServer(t, testFileSize, testStart, testCP)
		s.keep, s.chunk = 3, 2000
		s.burst, s.burstLen = 4, 10*testFileSize
		s.writeTo(advanceLSN(s.lsn, later))
		arch := s.startArchive()
		out := new(bytes.Buffer)
		tl, err := Open(Config{Dir: s.dir, Out: out, Server: s, Creator: testCreator, Poll: time.Millisecond, Archive: arch})
		if err != nil {
			t.Fatal(err)
		}
		total := advanceLSN(testCP, 12*testFileSize)
		if total%BlockSize == blockHdrSize {
			total++
		}
		stopWhenWritten(s, tl, total, func(end uint64) uint64 { return end })
		if err := run(t, tl); err != nil {
			t.Fatalf("archive from %d bytes past A: Run: %v", later, err)
		}
		if tl.ArchiveStart() != arch.start || arch.start < testCP/BlockSize*BlockSize || arch.flushes == 0 {
			t.Fatalf("archive start %d (fake %d, A %d), %d flushes", tl.ArchiveStart(), arch.start, testCP, arch.flushes)
		}
		checkOutput(t, out.Bytes(), tl, total, total)
	}
}

// TestTailerArchiveDeleted: the server deletes the archive (its session ended) while
// the copy follows it: Run fails saying so instead of waiting for blocks that never
// come.
func TestTailerArchiveDeleted(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	s.chunk = 2000
	arch := s.startArchive()
	tl, err := Open(Config{Dir: s.dir, Out: new(bytes.Buffer), Server: s, Creator: testCreator, Poll: time.Millisecond, Archive: arch})
	if err != nil {
		t.Fatal(err)
	}
	s.afterWrite = func() {
		if at := tl.ArchiveStart(); s.arch != nil && at != 0 && tl.Copied() > at+4*BlockSize {
			s.arch = nil
			os.Remove(arch.path)
		}
	}
	if err := run(t, tl); err == nil || !strings.Contains(err.Error(), "deleted its redo log archive") {
		t.Fatalf("Run = %v, want the archive's deletion named", err)
	}
}

func TestTailerNextFileGone(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	s.chunk = 2000
	tl, _ := openFake(t, s)
	s.afterWrite = func() {
		if s.calls == 3 {
			s.total = s.lsn
			s.writeTo(s.files[0].EndLSN + 3000)
			if err := os.Remove(s.files[1].Path); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkLapped(t, run(t, tl), tl, "is gone")
}

func TestTailerBadChecksum(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transient bool
	}{{"transient", true}, {"persistent", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer(t, testFileSize, testStart, testCP)
			s.chunk = 3000
			tl, out := openFake(t, s)
			bad := testCP/BlockSize*BlockSize + 4*BlockSize
			total := advanceLSN(testCP, 60000)
			stopWhenWritten(s, tl, total, func(end uint64) uint64 { return end })
			next := s.afterWrite
			s.afterWrite = func() {
				next()
				switch {
				case s.calls == 1: // written, not read yet: corrupt one byte
					s.writeAt(s.fileOf(bad).Path, []byte{0x5a}, int64(HeaderSize+bad-s.files[0].StartLSN+100))
				case s.calls == 2 && tc.transient:
					s.writeBlock(fakeBlock(bad, s.lsn), bad)
				}
			}
			err := run(t, tl)
			if tc.transient {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				checkOutput(t, out.Bytes(), tl, total, total)
				return
			}
			if !errors.Is(err, ErrCorrupt) || tl.Copied() != bad || !strings.Contains(err.Error(), "checksum mismatch") {
				t.Fatalf("Run = %v (copied %d), want ErrCorrupt at %d", err, tl.Copied(), bad)
			}
			t.Log(err)
		})
	}
}

func TestTailerRefusesEncryptedBlock(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	s.chunk = 3000
	tl, _ := openFake(t, s)
	s.afterWrite = func() {
		if s.calls == 2 {
			bs := testCP/BlockSize*BlockSize + 8*BlockSize
			b := fakeBlock(bs, bs+BlockSize)
			b[4] |= 0x80
			s.writeBlock(b, bs)
		}
	}
	if err := run(t, tl); !errors.Is(err, ErrEncrypted) || !strings.Contains(err.Error(), "redo log encryption is not supported") {
		t.Fatalf("Run = %v, want ErrEncrypted", err)
	}
}

func TestTailerRedoDisabled(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	s.setFlags(&s.files[0], FlagNoLogging)
	if _, err := Open(Config{Dir: s.dir, Out: new(bytes.Buffer), Server: s}); !errors.Is(err, ErrRedoDisabled) {
		t.Fatalf("Open = %v, want ErrRedoDisabled", err)
	}
	s.setFlags(&s.files[0], 0)
	tl, _ := openFake(t, s)
	stopWhenWritten(s, tl, advanceLSN(testCP, 50000), func(end uint64) uint64 {
		s.setFlags(&s.files[len(s.files)-1], FlagCrashUnsafe)
		return end
	})
	if err := run(t, tl); !errors.Is(err, ErrRedoDisabled) {
		t.Fatalf("Run = %v, want ErrRedoDisabled", err)
	}
}

func TestTailerStopBelowStart(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	tl, out := openFake(t, s)
	tl.StopAt(0) // as the engine does to cancel: means A
	if err := run(t, tl); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if tl.EndLSN() != testCP || out.Len() != HeaderSize+BlockSize {
		t.Fatalf("end %d, %d bytes; want %d and the block of A", tl.EndLSN(), out.Len(), testCP)
	}
	if err := tl.Run(context.Background()); err == nil {
		t.Fatal("second Run returned nil")
	}
	if err := tl.WaitCopied(context.Background(), testCP); err != nil {
		t.Fatalf("WaitCopied(A): %v", err)
	}
	if err := tl.WaitCopied(context.Background(), testCP+BlockSize); err == nil {
		t.Fatal("WaitCopied beyond the end returned nil")
	}
}

func TestTailerCancel(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	tl, _ := openFake(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := tl.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want deadline exceeded", err)
	}
	if tl.EndLSN() != 0 {
		t.Fatalf("EndLSN %d after a failed Run", tl.EndLSN())
	}
}

func TestOpenConfig(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	for _, cfg := range []Config{
		{Out: new(bytes.Buffer), Server: s},
		{Dir: s.dir, Server: s},
		{Dir: s.dir, Out: new(bytes.Buffer)},
		{Dir: s.dir, Out: new(bytes.Buffer), Server: s, Creator: strings.Repeat("x", 32)},
		{Dir: t.TempDir(), Out: new(bytes.Buffer), Server: s},
	} {
		if _, err := Open(cfg); err == nil {
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

func TestTailerAdvance(t *testing.T) {
	s := newFakeServer(t, testFileSize, testStart, testCP)
	var got []uint64
	tl, err := Open(Config{Dir: s.dir, Out: new(bytes.Buffer), Server: s, Poll: time.Millisecond,
		Advance: func(_ context.Context, lsn uint64) error { got = append(got, lsn); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	stopWhenWritten(s, tl, advanceLSN(testCP, 100000), func(end uint64) uint64 { return end })
	if err := run(t, tl); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(got) < 5 || got[len(got)-1] != tl.Copied() {
		t.Fatalf("Advance called with %v, copied %d", got, tl.Copied())
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] || got[i-1] > tl.Copied() {
			t.Fatalf("Advance not increasing within the copy: %v", got)
		}
	}
	s2 := newFakeServer(t, testFileSize, testStart, testCP)
	boom := errors.New("connection lost")
	tl2, err := Open(Config{Dir: s2.dir, Out: new(bytes.Buffer), Server: s2, Poll: time.Millisecond,
		Advance: func(context.Context, uint64) error { return boom }})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t, tl2); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the Advance error", err)
	}
}
