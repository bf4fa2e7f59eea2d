//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestLockNeverWaitsOnTheEnd: a server holding an Aria and a MyISAM table of 4 MB of
// random bytes each (which compression cannot shrink; the Aria log holds 8 MB more),
// written during the backups with the bank, non-InnoDB and DDL workloads, is backed up
// three times: into a local directory, as a (zstd) stream through a 4 MiB/s pipe, and
// into S3 through a proxy capping uploads at 4 MiB/s. BLOCK_DDL copies those tables and
// most of the Aria log; BLOCK_COMMIT the mysql schema's tables and the Aria log's last
// MiB. When they went straight into the end, on today's main, the stream held
// BLOCK_COMMIT 1.65 s and BLOCK_DDL 2.8 s, S3 1.26 s and 7.9 s, the local directory
// 0.08 s and 0.3 s: every commit on the server waited on the link. Now they wait in the
// local lock spool. Each lock's duration on the slow ends, read from the metrics file
// (BLOCK_COMMIT from the log too), must be within twice the local directory's plus a
// slack: 150 ms for BLOCK_COMMIT, which absorbs the scheduling noise of a shared 2-core
// VM where the local one takes tens of milliseconds, and is ten times smaller than what
// the slow link cost; 500 ms for BLOCK_DDL, which also waits for the redo copy to reach
// the current LSN and copies again the 8 to 11 tablespaces the DDL loop created, a
// number that varies from run to run. The stream and the S3 backup restore consistent: the workloads'
// invariants at their GTID (bank balances, the non-InnoDB tables' row checksums and
// CHECK TABLE EXTENDED, the DDL tables), the big tables' row checksums and CHECK TABLE,
// and the static tables' checksums equal the source's. A --max-spool too small for the
// files copied under the locks is refused before the first byte, in one line.
func TestLockNeverWaitsOnTheEnd(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 1, 2000)
	src.Exec(t, "CREATE DATABASE lockbig")
	for _, e := range []string{"Aria TRANSACTIONAL=1", "MyISAM"} {
		name := strings.ToLower(strings.Fields(e)[0])
		src.Exec(t, "CREATE TABLE lockbig."+name+" (id INT PRIMARY KEY, pad VARBINARY(1000), chk INT UNSIGNED NOT NULL) ENGINE="+e)
		src.Exec(t, "INSERT INTO lockbig."+name+" SELECT seq, RANDOM_BYTES(1000), 0 FROM lockbig.seq_1_to_4000")
		src.Exec(t, "UPDATE lockbig."+name+" SET pad = RANDOM_BYTES(1000), chk = CRC32(pad)") // an Aria log of random bytes
	}
	tmp := testdb.ShortDir(t)
	load.Start()
	stopBig := bigWriter(t, src)
	local := filepath.Join(tmp, "local")
	res := mustFerry(t, backupArgs(src, local, "--metrics-file", filepath.Join(tmp, "local.prom"))...)
	base, baseDDL := lockHeld(t, res.stderr, filepath.Join(tmp, "local.prom"))

	datadirs, gtids := map[string]string{}, map[string]string{}
	p := slowPipeline(t, streamArgs(src, "--tmpdir", tmp, "--metrics-file", filepath.Join(tmp, "stream.prom")),
		[]string{"restore", "--from", "-", "--datadir", filepath.Join(tmp, "restored-stream")}, false, 4<<20, 3*time.Minute)
	if p.backup.err != nil || p.restore.err != nil {
		t.Fatalf("pipeline failed: backup %v, restore %v", p.backup.err, p.restore.err)
	}
	datadirs["stream"], gtids["stream"] = filepath.Join(tmp, "restored-stream"), restoredGTID(t, p.restore.stdout)
	stream, streamDDL := lockHeld(t, p.backup.stderr, filepath.Join(tmp, "stream.prom"))

	r := newS3Repo(t, "locks", "db1")
	r.proxy.Set(testdb.Faults{Rate: 4 << 20})
	// Uncompressed through the smallest pipeline: the copy fills it before the locks, as
	// a server larger than --max-memory does, and the link holds back what comes next.
	res = r.run(t, repoBackupArgs(src, r.url, "--tmpdir", tmp, "--metrics-file", filepath.Join(tmp, "s3.prom"),
		"--compress", "none", "--parallel", "1", "--max-memory", "37M", "--part-size", "1M")...)
	r.proxy.Set(testdb.Faults{})
	s3, s3DDL := lockHeld(t, res.stderr, filepath.Join(tmp, "s3.prom"))
	out := r.run(t, "restore", "--repo", r.url, "latest", "--datadir", filepath.Join(tmp, "restored-s3"))
	datadirs["s3"], gtids["s3"] = filepath.Join(tmp, "restored-s3"), restoredGTID(t, out.stdout)

	t.Logf("BLOCK_COMMIT held: local directory %v, stream at 4 MiB/s %v, S3 at 4 MiB/s %v", base, stream, s3)
	t.Logf("BLOCK_DDL held: local directory %v, stream at 4 MiB/s %v, S3 at 4 MiB/s %v", baseDDL, streamDDL, s3DDL)
	for _, c := range []struct {
		end         string
		commit, ddl time.Duration
	}{{"a stream through a 4 MiB/s pipe", stream, streamDDL}, {"S3 through a 4 MiB/s link", s3, s3DDL}} {
		if c.commit > 2*base+150*time.Millisecond {
			t.Errorf("BLOCK_COMMIT was held %v on %s, %v on a local directory: commits waited on the end", c.commit, c.end, base)
		}
		if c.ddl > 2*baseDDL+500*time.Millisecond {
			t.Errorf("BLOCK_DDL was held %v on %s, %v on a local directory: DDL waited on the end", c.ddl, c.end, baseDDL)
		}
	}

	// --max-spool leaves no room for the files copied under the locks: refused before
	// the first byte of the stream.
	if res := wantFail(t, nil, "copied under the backup locks", streamArgs(src, "--max-spool", "2M", "--tmpdir", tmp)...); res.stdout != "" {
		t.Errorf("the refused backup wrote %d bytes of stream", len(res.stdout))
	}
	stopBig()
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t), "filler") // the tables no workload writes
	for _, name := range []string{"stream", "s3"} {
		t.Run(name+"/check", func(t *testing.T) {
			rep := testdb.Start(t, testdb.Options{Datadir: datadirs[name], ServerID: 2})
			load.Check(t, rep.DB(t), gtids[name])
			checkBig(t, rep)
			compareChecksums(t, want, testdb.Checksums(t, rep.DB(t), "filler"))
			rep.Stop(t)
		})
	}
}

// checkBig checks the big Aria and MyISAM tables of a restored copy: CHECK TABLE
// EXTENDED passes, all 4,000 rows are there and each row's checksum matches its bytes.
func checkBig(t *testing.T, s *testdb.Server) {
	t.Helper()
	for _, table := range []string{"lockbig.aria", "lockbig.myisam"} {
		if got := s.QueryString(t, "SELECT CONCAT(COUNT(*), ' ', COALESCE(SUM(chk <> CRC32(pad)), 0)) FROM "+table); got != "4000 0" {
			t.Errorf("%s: rows and bad checksums %q, want \"4000 0\"", table, got)
		}
		var name, op, typ, text string
		if err := s.DB(t).QueryRow("CHECK TABLE "+table+" EXTENDED").Scan(&name, &op, &typ, &text); err != nil || text != "OK" {
			t.Errorf("CHECK TABLE %s EXTENDED: %s %s (%v)", table, typ, text, err)
		}
	}
}

// bigWriter rewrites random rows of the big Aria and MyISAM tables until the function
// it returns is called (which fails the test if a write failed).
func bigWriter(t *testing.T, src *testdb.Server) func() {
	ctx, stop := context.WithCancel(context.Background())
	db := src.DB(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, table := range []string{"aria", "myisam"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				q := "UPDATE lockbig." + table + " SET pad = RANDOM_BYTES(1000), chk = CRC32(pad) WHERE id = ?"
				if _, err := db.ExecContext(ctx, q, 1+rand.IntN(4000)); err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("lockbig.%s: %w", table, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return func() {
		t.Helper()
		stop()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

var heldRe = regexp.MustCompile(`msg="BLOCK_COMMIT released" held=(\S+)`)

// lockHeld reads how long a backup held BLOCK_COMMIT from its log, checks that its
// metrics file gives the same, and returns it with how long it held BLOCK_DDL (from the
// metrics file).
func lockHeld(t *testing.T, log, metricsFile string) (commit, ddl time.Duration) {
	t.Helper()
	m := heldRe.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no BLOCK_COMMIT line in the backup's log:\n%s", tail(log, 20))
	}
	held, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	metrics := promValues(t, metricsFile)
	ddlS, ok := metrics["ferry_backup_block_ddl_seconds"]
	commitS, ok2 := metrics["ferry_backup_block_commit_seconds"]
	if !ok || !ok2 {
		t.Errorf("the metrics file %s lacks the lock durations: %v", metricsFile, metrics)
	} else if d := commitS - held.Seconds(); d > 0.001 || d < -0.001 {
		t.Errorf("metrics say BLOCK_COMMIT was held %.4f s, the log %v", commitS, held)
	}
	return held, time.Duration(ddlS * float64(time.Second))
}

// promValues reads a Prometheus textfile's samples by name.
func promValues(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("metrics file: %v", err)
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = x
		}
	}
	return out
}
