//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestCloneResume: a slow clone (through the TCP proxy, rate-limited) under the bank
// workload is interrupted (SIGINT) once it has received the system tablespace and
// several others whole; ferry clone --resume is killed (SIGKILL) while it receives the
// donor's changed pages; a second --resume keeps what the first clone received, the
// donor sends only the pages changed since that copy began (and the other files
// whole), far fewer bytes than the clone holds, and the clone holds the bank's
// invariants at its GTID and replicates to the source's checksums.
func TestCloneResume(t *testing.T) {
	t.Parallel()
	d := startDonor(t, 40000)
	proxy := testdb.StartTCPProxy(t, d.addr)
	datadir := filepath.Join(testdb.ShortDir(t), "data")
	staging := filepath.Join(filepath.Dir(datadir), ".data.ferry-clone")
	scratch := filepath.Join(staging, ".ferry-clone-resume")
	args := []string{"clone", "--from", proxy.Addr, "--token-file", d.token, "--datadir", datadir, "--compress", "none"}
	d.load.Start()

	msg := stopCloneAt(t, append(args, "--max-rate", "8M"), syscall.SIGINT, "the clone to receive tablespaces whole", func() bool {
		_, _, big := cloneJournaled(staging)
		return big // the system tablespace and the filler table are most of this server's data
	})
	if last := lastLine(msg); !strings.Contains(last, staging) || !strings.Contains(last, "--resume") {
		t.Fatalf("the interrupted clone did not say where it kept the partial clone and how to continue it:\n%s", tail(msg, 10))
	}
	if ents, _ := os.ReadDir(filepath.Dir(datadir)); len(ents) != 1 || ents[0].Name() != filepath.Base(staging) {
		t.Fatalf("the interrupted clone left more than its staging directory: %v", ents)
	}
	n, kept, _ := cloneJournaled(staging)
	if n == 0 {
		t.Fatalf("the interrupted clone left no journal in %s", staging)
	}
	if _, err := os.Stat(datadir); err == nil {
		t.Fatalf("the interrupted clone created the datadir")
	}
	stopCloneAt(t, append(args, "--resume", "--max-rate", "4M"), syscall.SIGKILL, "the resumed clone to receive changed pages", func() bool {
		size, _ := dirSize(scratch)
		return size > 2<<20
	})

	before := proxy.Bytes()
	res := mustFerry(t, append(args, "--resume")...)
	wire := proxy.Bytes() - before
	total, _ := dirSize(datadir)
	t.Logf("%d tablespaces (%d MiB) received whole before the interrupt; the resume sent %.1f MiB for a clone of %.1f MiB",
		n, kept>>20, float64(wire)/(1<<20), float64(total)/(1<<20))
	if !strings.Contains(res.stderr, "resume: keeping the tablespaces") || !strings.Contains(res.stderr, "resumed clone applied") {
		t.Fatalf("the clone did not resume:\n%s", tail(res.stderr, 20))
	}
	if wire > total-kept/2 {
		t.Fatalf("the resume sent %d bytes; the clone holds %d, of which %d were kept: the kept tablespaces went again", wire, total, kept)
	}
	if _, err := os.Stat(staging); err == nil {
		t.Fatalf("the staging directory %s is left after the clone", staging)
	}
	d.load.Stop(t)
	checkReplica(t, d.src, d.load, datadir, clonedGTID(t, res.stdout), testdb.Checksums(t, d.src.DB(t)))
}

// stopCloneAt runs ferry with args until cond holds, then sends it sig, waits for it
// and returns what it wrote on stderr.
func stopCloneAt(t *testing.T, args []string, sig syscall.Signal, what string, cond func() bool) string {
	t.Helper()
	cmd := exec.Command(ferryBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, 2*time.Minute, what, func() bool {
		if cmd.ProcessState != nil || syscall.Kill(cmd.Process.Pid, 0) != nil {
			t.Fatalf("ferry %s ended before it was interrupted", strings.Join(args, " "))
		}
		return cond()
	})
	cmd.Process.Signal(sig)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("ferry %s succeeded after %v", strings.Join(args, " "), sig)
	}
	return stderr.String()
}

// cloneJournaled counts the tablespaces the clone's journal in staging records as
// received whole, their bytes, and whether the two largest (ibdata1 and filler/t.ibd)
// are among them.
func cloneJournaled(staging string) (n int, bytes int64, big bool) {
	f, err := os.Open(filepath.Join(staging, ".ferry-clone.journal"))
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sys, filler := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Done string `json:"done"`
			Size int64  `json:"size"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Done != "" {
			n++
			bytes += l.Size
			sys = sys || l.Done == "ibdata1"
			filler = filler || l.Done == "filler/t.ibd"
		}
	}
	return n, bytes, sys && filler
}
