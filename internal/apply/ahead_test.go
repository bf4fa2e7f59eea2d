package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// copyLog copies dir's ib_logfile0 into a directory of its own (a backup's, read
// while the restore copies it) and returns its path.
func copyLog(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "ib_logfile0"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ib_logfile0")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// padLog pads dir's ib_logfile0 to n bytes with zeros (as a restore pads the log it
// recovers) and then writes tail at its end.
func padLog(t *testing.T, dir string, n int64, tail []byte) {
	t.Helper()
	p := filepath.Join(dir, "ib_logfile0")
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(tail, n-int64(len(tail))); err != nil {
		t.Fatal(err)
	}
}

// applyAhead applies dir with the parse ahead h and fails unless it used h as
// useAhead says and gave want's pages.
func applyAhead(t *testing.T, dir, want string, h *Ahead, useAhead bool) {
	t.Helper()
	res, err := Dir(context.Background(), Config{Dir: dir, Ahead: h})
	if err != nil {
		t.Fatal(err)
	}
	if res.ParsedAhead != useAhead {
		t.Errorf("parsed ahead used: %v, want %v", res.ParsedAhead, useAhead)
	}
	samePages(t, dir, want)
}

// samePages fails unless every page of the synthetic datadir dir equals want's.
func samePages(t *testing.T, dir, want string) {
	t.Helper()
	for no := uint32(1); no < synthPages; no++ {
		if got, w := readSynthPage(t, dir, no), readSynthPage(t, want, no); !bytes.Equal(got, w) {
			t.Errorf("page %d differs from the plain apply's", no)
		}
	}
}

// TestParseAhead: a log parsed ahead is applied as Dir would parse and apply it itself,
// and a parse ahead of another log (another backup, the same log changed after it was
// parsed, bytes after its end that are not padding) is never applied: Dir parses the
// log in its datadir instead.
func TestParseAhead(t *testing.T) {
	mtrs := [][][]byte{
		{synthWrite(3, 100, "three")},
		{synthRec(recInit, 4, nil), synthWrite(4, 200, "four")},
		{synthWrite(5, 300, "five")},
	}
	want := synthDatadir(t, mtrs...)
	if _, err := Dir(context.Background(), Config{Dir: want}); err != nil {
		t.Fatal(err)
	}
	other := synthDatadir(t, [][]byte{synthWrite(3, 100, "other")})
	cases := []struct {
		name     string
		log      func(dir string) string // the log parsed ahead
		tail     []byte                  // written at the end of the padded log in the copy
		useAhead bool
	}{
		{"same log, padded", func(dir string) string { return copyLog(t, dir) }, nil, true},
		{"another backup's log", func(string) string { return copyLog(t, other) }, nil, false},
		{"bytes after the log", func(dir string) string { return copyLog(t, dir) }, []byte{7}, false},
		{"no log", func(string) string { return filepath.Join(t.TempDir(), "ib_logfile0") }, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := synthDatadir(t, mtrs...)
			h := ParseAhead(context.Background(), c.log(dir), 16384, 0)
			defer h.Close()
			padLog(t, dir, 1<<20, c.tail)
			applyAhead(t, dir, want, h, c.useAhead)
		})
	}
}

// TestParseAheadRecordError: a record ferry refuses is refused the same way whether
// the log was parsed ahead or not, and nothing is written.
func TestParseAheadRecordError(t *testing.T) {
	t.Setenv("FERRY_TEST_FAIL", "apply-record")
	dir := synthDatadir(t, [][]byte{synthWrite(3, 100, "three")}, [][]byte{synthRec(recExtended, 3, []byte{1})})
	before := bytes.Clone(readSynthPage(t, dir, 3))
	h := ParseAhead(context.Background(), copyLog(t, dir), 16384, 0)
	defer h.Close()
	_, err := Dir(context.Background(), Config{Dir: dir, Ahead: h})
	var re *RecordError
	if !errors.As(err, &re) {
		t.Fatalf("Dir: %v, want a record error", err)
	}
	if got := readSynthPage(t, dir, 3); !bytes.Equal(got, before) {
		t.Error("page 3 was written before the refused record was found")
	}
}

// writeFed rewrites the log at path as a clone's frames would land: chunk bytes at a
// time in a shuffled order, each reported to feed once written, over garbage (a read
// of a range not yet reported would parse it). failAt > 0 fails the feed once that
// many chunks are written, as a replaced log does. It returns when the log is whole.
func writeFed(t *testing.T, path string, feed *Feed, chunk int, failAt int) {
	t.Helper()
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xa5}, len(log)), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var offs []int
	for off := 0; off < len(log); off += chunk {
		offs = append(offs, off)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	for i, off := range offs {
		end := min(off+chunk, len(log))
		if _, err := f.WriteAt(log[off:end], int64(off)); err != nil {
			t.Fatal(err)
		}
		feed.Wrote(int64(off), int64(end-off))
		if i+1 == failAt {
			feed.Fail(ErrFeedReplaced)
		}
		time.Sleep(time.Millisecond)
	}
	feed.Complete(int64(len(log)))
}

// TestFollowAhead: a log parsed as its chunks land, in any order, gives the pages of a
// plain apply and is used; a feed that fails (the log replaced) is not used, and Dir
// parses the log itself; a parse waiting on a feed ends when it is closed.
func TestFollowAhead(t *testing.T) {
	mtrs := [][][]byte{
		{synthWrite(3, 100, "three")},
		{synthRec(recInit, 4, nil), synthWrite(4, 200, "four")},
		{synthWrite(5, 300, "five"), synthWrite(3, 900, "later")},
	}
	want := synthDatadir(t, mtrs...)
	if _, err := Dir(context.Background(), Config{Dir: want}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		failAt   int
		useAhead bool
	}{{"whole", 0, true}, {"replaced", 3, false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := synthDatadir(t, mtrs...)
			path := filepath.Join(dir, "ib_logfile0")
			feed := NewFeed(path)
			h := FollowAhead(context.Background(), feed, 16384, 0)
			defer h.Close()
			writeFed(t, path, feed, 512, c.failAt)
			applyAhead(t, dir, want, h, c.useAhead)
		})
	}
	t.Run("never written", func(t *testing.T) {
		h := FollowAhead(context.Background(), NewFeed(filepath.Join(t.TempDir(), "ib_logfile0")), 16384, 0)
		done := make(chan struct{})
		go func() { h.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end a parse waiting for a log never written")
		}
	})
}

// TestAheadFirstPass: of a log whose records do not fit one batch, the parse ahead
// (of a complete file, or following a log as it lands) makes the first pass, and Dir
// only parses and rolls the batches, with the pages of a plain apply.
func TestAheadFirstPass(t *testing.T) {
	var mtrs [][][]byte
	for i := range 60 {
		no := uint32(1 + i%(synthPages-1))
		if i == 30 {
			mtrs = append(mtrs, [][]byte{synthRec(recInit, no, nil), synthWrite(no, 300, "again")})
			continue
		}
		mtrs = append(mtrs, [][]byte{synthWrite(no, 100+16*i, "0123456789a")})
	}
	want := synthDatadir(t, mtrs...)
	if _, err := Dir(context.Background(), Config{Dir: want}); err != nil {
		t.Fatal(err)
	}
	for _, memory := range []int{600, 64} {
		for _, follow := range []bool{false, true} {
			t.Run(fmt.Sprintf("memory %d, follow %v", memory, follow), func(t *testing.T) {
				dir := synthDatadir(t, mtrs...)
				path := filepath.Join(dir, "ib_logfile0")
				var h *Ahead
				if follow {
					feed := NewFeed(path)
					h = FollowAhead(context.Background(), feed, 16384, memory)
					writeFed(t, path, feed, 700, 0)
				} else {
					h = ParseAhead(context.Background(), copyLog(t, dir), 16384, memory)
				}
				defer h.Close()
				res, err := Dir(context.Background(), Config{Dir: dir, Memory: memory, Ahead: h})
				if err != nil {
					t.Fatal(err)
				}
				if !res.ParsedAhead || res.Batches < 2 {
					t.Errorf("parsed ahead used: %v, %d batches; want the first pass made ahead and several batches", res.ParsedAhead, res.Batches)
				}
				samePages(t, dir, want)
			})
		}
	}
}
