package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestCloneResume: a slow clone (through the TCP proxy, rate-limited) under the bank
// workload is stopped once it has received several tablespaces whole (SIGKILL, and
// SIGINT); ferry clone --resume keeps them, the donor sends only their pages changed
// since the interrupted copy began (and the other files whole), far fewer bytes than
// the clone holds, and the clone holds the bank's invariants at its GTID and
// replicates to the source's checksums.
func TestCloneResume(t *testing.T) {
	d := startDonor(t, 40000)
	proxy := testdb.StartTCPProxy(t, d.addr)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			datadir := filepath.Join(shortTemp(t), "data")
			staging := filepath.Join(filepath.Dir(datadir), ".data.ferry-clone")
			d.load.Start()
			args := []string{"clone", "--from", proxy.Addr, "--token-file", d.token, "--datadir", datadir, "--compress", "none"}
			first := startFerry(t, nil, append(args, "--max-rate", "6M")...)
			waitFor(t, 2*time.Minute, "the first clone to receive tablespaces whole", func() bool {
				if first.ProcessState != nil || syscall.Kill(first.Process.Pid, 0) != nil {
					t.Fatal("the first clone ended before it was interrupted")
				}
				n, _ := cloneJournaled(staging)
				return n >= 8
			})
			first.Process.Signal(sig)
			first.Wait()
			n, kept := cloneJournaled(staging)
			if _, err := os.Stat(datadir); err == nil {
				t.Fatalf("the interrupted clone created the datadir")
			}
			before := proxy.Bytes()
			res := mustFerry(t, append(args, "--resume")...)
			wire := proxy.Bytes() - before
			total, _ := dirSize(datadir)
			t.Logf("%v after %d tablespaces (%d MiB) received whole; the resume sent %.1f MiB for a clone of %.1f MiB",
				sig, n, kept>>20, float64(wire)/(1<<20), float64(total)/(1<<20))
			if !strings.Contains(res.stderr, "resume: keeping the tablespaces") || !strings.Contains(res.stderr, "resumed clone applied") {
				t.Fatalf("the clone did not resume:\n%s", tail(res.stderr, 20))
			}
			if wire > total-kept/2 {
				t.Fatalf("the resume sent %d bytes, the clone holds %d of which %d were kept: the kept tablespaces went again", wire, total, kept)
			}
			d.load.Stop(t)
			checkReplica(t, d.src, d.load, datadir, clonedGTID(t, res.stdout), testdb.Checksums(t, d.src.DB(t)))
		})
	}
}

// cloneJournaled counts the tablespaces the clone's journal in staging records as
// received whole, and their bytes.
func cloneJournaled(staging string) (n int, bytes int64) {
	f, err := os.Open(filepath.Join(staging, ".ferry-clone.journal"))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Done string `json:"done"`
			Size int64  `json:"size"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Done != "" {
			n++
			bytes += l.Size
		}
	}
	return n, bytes
}
