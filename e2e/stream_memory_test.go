//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestStreamMemoryIsBounded streams a backup into a reader many times slower than the
// copy, so every stage of the pipeline fills up: the backup must announce its memory
// budget and its peak RSS must stay within the budget plus a fixed allowance for the
// runtime, the copy buffers and the compressors.
func TestStreamMemoryIsBounded(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE big")
	src.Exec(t, "CREATE TABLE big.t (id INT PRIMARY KEY, pad VARBINARY(250)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO big.t SELECT seq, RANDOM_BYTES(200) FROM big.seq_1_to_250000") // incompressible
	const budgetMiB, allowanceMiB = 40, 64
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, streamArgs(src, "--compress", "zstd", "--max-memory", "40M")...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	n := slowRead(out, 16<<20)
	rss := peak() >> 10 // KiB → MiB
	if err := cmd.Wait(); err != nil {
		t.Fatalf("backup: %v\n%s", err, tail(errb.String(), 10))
	}
	if !strings.Contains(errb.String(), "memory_budget_mib=") {
		t.Errorf("the backup did not print its memory budget:\n%s", tail(errb.String(), 10))
	}
	t.Logf("streamed %d MiB through a slow reader; peak RSS %d MiB (budget %d MiB)", n>>20, rss, budgetMiB)
	if n < 40<<20 {
		t.Fatalf("only %d bytes streamed: the table is too small to fill the pipeline", n)
	}
	if rss > budgetMiB+allowanceMiB {
		t.Errorf("peak RSS %d MiB exceeds the %d MiB budget plus %d MiB", rss, budgetMiB, allowanceMiB)
	}
}

// watchPeakRSS polls the process's VmHWM (peak RSS, KiB) until the returned function
// is called, which gives the last value read. rusage's maxrss would not do: it counts
// the test binary's own memory, shared with the child between fork and exec.
func watchPeakRSS(pid int) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					var kb int64
					if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil && kb > peak.Load() {
						peak.Store(kb)
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}

// slowRead reads r at about rate bytes per second and returns the bytes read.
func slowRead(r io.Reader, rate int) int64 {
	buf := make([]byte, 64<<10)
	var n int64
	start := time.Now()
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err != nil {
			return n
		}
		if ahead := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
}
