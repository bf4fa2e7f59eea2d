//go:build e2e

package redo

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// inode returns the inode number of path.
func inode(t *testing.T, path string) uint64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

func TestTailOnlineResize(t *testing.T) {
	s := startServer(t, "4M", "--innodb-log-buffer-size=2M")
	loadSetup(t, s)
	var out bytes.Buffer
	out.Grow(64 << 20)
	tl, err := Open(Config{Path: s.logPath(), Out: &out, Server: s})
	if err != nil {
		t.Fatal(err)
	}
	ino := inode(t, s.logPath())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := runTailer(ctx, tl)
	for i := range 16 {
		if i == 4 {
			s.exec(t, "SET GLOBAL innodb_log_file_size = 6291456") // returns once the resize is done
		}
		if err := update(s, i); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if inode(t, s.logPath()) == ino {
		t.Fatalf("ib_logfile0 was not replaced by the resize:\n%s", s.logTail())
	}
	stop := stopAtCurrent(ctx, t, s, tl, done)
	if got := tl.log.ring.capacity; got != 6291456-StartOffset {
		t.Errorf("capacity after the resize = %d, want %d", got, 6291456-StartOffset)
	}
	ll, err := VerifyLinear(out.Bytes(), nil, "")
	if err != nil || ll.EndLSN != tl.EndLSN() || ll.EndLSN < stop {
		t.Fatalf("VerifyLinear: %+v, %v (end %d, stop %d)", ll, err, tl.EndLSN(), stop)
	}
	t.Logf("copied %d..%d across the resize", ll.Header.FirstLSN, ll.EndLSN)
}
