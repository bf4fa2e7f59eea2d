//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestRepoMemoryIsBounded backs up incompressible data into an S3 server whose object
// uploads are slowed down far below the copy's speed, so parts pile up waiting: the
// backup must announce its budget and its peak RSS stay within it plus a fixed
// allowance for the runtime, the copy buffers and the HTTP client.
func TestRepoMemoryIsBounded(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE big")
	src.Exec(t, "CREATE TABLE big.t (id INT PRIMARY KEY, pad VARBINARY(250)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO big.t SELECT seq, RANDOM_BYTES(200) FROM big.seq_1_to_500000") // ~120 MiB, incompressible
	r := newS3Repo(t, "slow", "db")
	r.proxy.Set(testdb.Faults{Delay: 700 * time.Millisecond, Only: "/objects/"})
	const budgetMiB, allowanceMiB = 64, 64
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, repoBackupArgs(src, r.url, "--max-memory", "64M", "--part-size", "4M", "--uploads", "2")...)
	cmd.Env = append(cmd.Environ(), r.env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	rss := peak() >> 10
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, tail(errb.String(), 10))
	}
	if !strings.Contains(errb.String(), "memory_budget_mib=") {
		t.Errorf("the backup did not print its memory budget:\n%s", tail(errb.String(), 10))
	}
	list := listRepo(t, r.env, r.url)
	if len(list) != 1 || list[0].StoredSize < 100<<20 {
		t.Fatalf("list: %+v: want one backup of over 100 MiB stored", list)
	}
	t.Logf("uploaded %d MiB in %d objects through a slow link; peak RSS %d MiB (budget %d MiB)", list[0].StoredSize>>20, list[0].Objects, rss, budgetMiB)
	if rss > budgetMiB+allowanceMiB {
		t.Errorf("peak RSS %d MiB exceeds the %d MiB budget plus %d MiB", rss, budgetMiB, allowanceMiB)
	}
}
