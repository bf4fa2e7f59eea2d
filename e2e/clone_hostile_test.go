//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestServeBoundsStrangers: many TLS connections that never authenticate, each
// declaring a 64 MiB frame and then stalling, cost ferry serve a few MiB at most (the
// declared frames are refused before anything is allocated, and connections past the
// limit are closed at once); a real clone through the same serve still succeeds.
func TestServeBoundsStrangers(t *testing.T) {
	t.Parallel()
	d := startDonor(t, 2000)
	pid := d.serve.Process.Pid
	base := hwm(t, pid)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", d.addr, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				return // closed at once: over the limit of connections authenticating
			}
			var h [42]byte
			h[0] = 1                                        // a control frame
			binary.LittleEndian.PutUint32(h[34:], 64<<20-1) // declaring a 64 MiB payload
			c.Write(h[:])
			c.Write(make([]byte, 1024)) // and a little of it, then stall
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	grown := hwm(t, pid) - base
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	t.Logf("serve's peak RSS grew by %d MiB with %d stalled strangers", grown>>20, len(conns))
	if grown > 48<<20 {
		t.Fatalf("64 unauthenticated connections declaring 64 MiB frames grew serve's peak RSS by %d MiB (bound 48)", grown>>20)
	}
	datadir := filepath.Join(testdb.ShortDir(t), "data")
	out := mustFerry(t, "clone", "--from", d.addr, "--token-file", d.token, "--datadir", datadir)
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	if n := rep.QueryString(t, "SELECT COUNT(*) FROM filler.t"); n != "2000" {
		t.Fatalf("the clone after the strangers has %s rows in filler.t, want 2000\n%s", n, out.stdout)
	}
}

// hwm is a process's peak resident memory so far (VmHWM), in bytes.
func hwm(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM for pid %d", pid)
	return 0
}
