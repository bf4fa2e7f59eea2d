package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestSlowStreamUnderRedoPressure: a server with an 8 MiB redo log, under the bank
// workload and a bulk updater rewriting 2,000 rows per statement, is streamed through
// a slow link into ferry restore: plain through 8 MiB/s, zstd+age through 2 MiB/s (a
// table of random bytes keeps compression from making the link fast). The server laps its log many
// times during the copy; when the redo copy wrote into the stream itself it was held
// back by the link and the backup failed within seconds with "redo log was
// overwritten". Now the redo waits in the local spool: the backup completes, its log
// gives the redo it kept and the spool's peak, and every restored copy holds the bank
// invariants at its GTID, replicates, and matches every table's checksum. A backup
// into an S3 repository whose uploads are capped at 8 MiB/s, and a clone capped with
// --max-rate 8M (--compress none), under the same load end the same way.
func TestSlowStreamUnderRedoPressure(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{LogFileSize: "8M", ServerID: 1}, 2, 40000)
	src.Exec(t, "CREATE TABLE filler.r (id INT PRIMARY KEY, pad VARBINARY(200)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO filler.r SELECT seq, RANDOM_BYTES(200) FROM filler.seq_1_to_60000")
	keyFile := filepath.Join(shortTemp(t), "key.txt")
	public := strings.TrimSpace(mustFerry(t, "keygen", "--output", keyFile).stdout)
	load.Start()
	tmp := shortTemp(t)
	modes := []struct {
		name            string
		backup, restore []string
		rate            int
	}{
		{"plain", []string{"--compress", "none"}, nil, 8 << 20},
		{"zstd+age", []string{"--compress", "zstd", "--encrypt-to", public}, []string{"--identity-file", keyFile}, 2 << 20},
	}
	restored, gtids, skipped := map[string]string{}, map[string]string{}, map[string]bool{}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			datadir := filepath.Join(tmp, "restored-"+strings.ReplaceAll(m.name, "+", "-"))
			stopBulk := bulkUpdater(t, src.DB(t), 2000, time.Second)
			p := slowPipeline(t, streamArgs(src, append(m.backup, "--tmpdir", tmp)...),
				append([]string{"restore", "--from", "-", "--datadir", datadir}, m.restore...), false, m.rate, 5*time.Minute)
			stopBulk()
			if p.backup.err != nil || p.restore.err != nil {
				t.Fatalf("pipeline failed: backup %v, restore %v", p.backup.err, p.restore.err)
			}
			var peak int64
			var redo int64
			fmt.Sscanf(after(p.backup.stderr, "redo_bytes="), "%d", &redo)
			if _, err := fmt.Sscanf(after(p.backup.stderr, "spool_peak_bytes="), "%d", &peak); err != nil || peak == 0 {
				t.Errorf("no spool peak in the backup's log (%v)", err)
			}
			t.Logf("redo %d MiB (%.1f laps of the 8 MiB log), spool peak %d MiB", redo>>20, float64(redo)/float64(8<<20), peak>>20)
			if redo < 3*(8<<20) {
				t.Errorf("only %d MiB of redo: the server did not lap its log during the backup, so the test proves nothing", redo>>20)
			}
			restored[m.name], gtids[m.name] = datadir, restoredGTID(t, p.restore.stdout)
		})
	}
	t.Run("s3 repository", func(t *testing.T) {
		defer func() { skipped["s3 repository"] = t.Skipped() }()
		r := newS3Repo(t, "slow", "db1")
		r.proxy.Set(testdb.Faults{Rate: 8 << 20})
		stopBulk := bulkUpdater(t, src.DB(t), 2000, time.Second)
		res := r.run(t, "backup", "--socket", src.Socket, "--user", "root", "--repo", r.url, "--compress", "none", "--tmpdir", tmp,
			"--max-memory", "64M", "--part-size", "8M") // a small pipeline: the link holds the copy back
		stopBulk()
		r.proxy.Set(testdb.Faults{})
		var redo int64
		fmt.Sscanf(after(res.stderr, "redo_bytes="), "%d", &redo)
		t.Logf("redo %d MiB (%.1f laps of the 8 MiB log)", redo>>20, float64(redo)/float64(8<<20))
		if redo < 3*(8<<20) {
			t.Errorf("only %d MiB of redo: the server did not lap its log during the backup, so the test proves nothing", redo>>20)
		}
		datadir := filepath.Join(tmp, "restored-s3")
		out := r.run(t, "restore", "--repo", r.url, "latest", "--datadir", datadir)
		restored["s3 repository"], gtids["s3 repository"] = datadir, restoredGTID(t, out.stdout)
	})
	t.Run("clone", func(t *testing.T) {
		datadir := filepath.Join(tmp, "cloned")
		stopBulk := bulkUpdater(t, src.DB(t), 2000, time.Second)
		before := lsnNow(t, src)
		out := cloneOf(t, src, tmp, datadir, "--max-rate", "8M", "--compress", "none")
		laps := float64(lsnNow(t, src)-before) / float64(8<<20)
		stopBulk()
		t.Logf("the server wrote %.1f laps of its 8 MiB log during the clone", laps)
		if laps < 3 {
			t.Errorf("the server did not lap its log during the clone, so the test proves nothing")
		}
		restored["clone"], gtids["clone"] = datadir, clonedGTID(t, out.stdout)
	})
	t.Run("killed", func(t *testing.T) { killWhileSpooling(t, src) })
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))
	for _, name := range []string{"plain", "zstd+age", "s3 repository", "clone"} {
		t.Run(name+"/check", func(t *testing.T) {
			if skipped[name] {
				t.Skip("skipped above")
			}
			if restored[name] == "" {
				t.Fatal("no restored copy to check: the round trip above failed")
			}
			checkReplica(t, src, load, restored[name], gtids[name], want)
		})
	}
}

// lsnNow is the server's current LSN.
func lsnNow(t testing.TB, s *testdb.Server) uint64 {
	var n uint64
	fmt.Sscan(s.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_LSN_CURRENT'"), &n)
	return n
}

// bulkUpdater rewrites rows rows of filler.t per statement, every pause, until stopped.
func bulkUpdater(t testing.TB, db *sql.DB, rows int, pause time.Duration) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			lo := (i * rows) % 40000
			db.ExecContext(ctx, "UPDATE filler.t SET pad = REPEAT(MD5(RAND()), 7) WHERE id BETWEEN ? AND ?", lo+1, lo+rows)
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// after returns what follows the first key in s, "" if none.
func after(s, key string) string {
	if i := strings.Index(s, key); i >= 0 {
		return s[i+len(key):]
	}
	return ""
}

// killWhileSpooling streams a backup into a reader too slow for the redo, waits until
// the spool has its file tier open (a deleted ferry-spool-* file among the process's
// descriptors: it was unlinked at creation, so --tmpdir never shows it), then kills
// ferry with SIGKILL: --tmpdir is empty before and after, nothing is left to clean.
func killWhileSpooling(t *testing.T, src *testdb.Server) {
	spoolDir := shortTemp(t)
	stopBulk := bulkUpdater(t, src.DB(t), 2000, 200*time.Millisecond)
	defer stopBulk()
	cmd := exec.Command(ferryBin, streamArgs(src, "--compress", "none", "--tmpdir", spoolDir)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go slowRead(out, 256<<10)
	found := ""
	for deadline := time.Now().Add(90 * time.Second); found == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", cmd.Process.Pid, fd.Name())); strings.Contains(l, "ferry-spool-") {
				found = l
			}
		}
	}
	if ents, _ := os.ReadDir(spoolDir); len(ents) != 0 {
		t.Errorf("--tmpdir shows %v while the backup runs: the spool file must be unlinked at creation", ents)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if found == "" {
		t.Fatal("the spool never used its file tier within 90 s: the test proves nothing")
	}
	if !strings.HasSuffix(found, "(deleted)") {
		t.Errorf("the spool file %s is not unlinked", found)
	}
	if ents, _ := os.ReadDir(spoolDir); len(ents) != 0 {
		t.Errorf("the killed backup left %v in --tmpdir", ents)
	}
}
