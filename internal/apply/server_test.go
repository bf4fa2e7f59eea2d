//go:build e2e

package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/pagediff"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// formats are the table layouts the workloads here write: every row format, and
// page_compressed.
var formats = []string{"ROW_FORMAT=DYNAMIC", "ROW_FORMAT=REDUNDANT", "ROW_FORMAT=COMPACT", "ROW_FORMAT=COMPRESSED", "PAGE_COMPRESSED=1"}

// TestMatchesMariabackupPrepare takes a mariadb-backup copy of a server under a mixed
// write load (every row format and page_compressed, inserts, updates, deletes, a small
// redo log), prepares one copy with mariadb-backup --prepare and one with ferry's native
// apply, and compares every page of every tablespace.
func TestMatchesMariabackupPrepare(t *testing.T) {
	s := testdb.Start(t, testdb.Options{LogFileSize: "256M"}) // mariadb-backup loses the race with small logs under this churn
	r := differential(t, s, formats, 2*time.Second, rand.New(rand.NewPCG(1, 2)))
	t.Logf("%d pages compared, %d decoded", r.Compared, r.Decoded)
	s2 := testdb.Start(t, testdb.Options{Datadir: r.native})
	var n int
	if err := s2.DB(t).QueryRow("SELECT COUNT(*) FROM test.t0").Scan(&n); err != nil {
		t.Fatal(err)
	}
}

// TestApplySoak is the long randomized differential run of bench/applysoak.sh: for the
// duration in FERRY_APPLY_SOAK (e.g. "2h"), rounds of random workloads (table formats,
// statement mixes, load lengths) each backed up with mariadb-backup and prepared both
// ways; any page that differs fails it.
func TestApplySoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("FERRY_APPLY_SOAK"))
	if err != nil {
		t.Skip("set FERRY_APPLY_SOAK to a duration (bench/applysoak.sh)")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	end := time.Now().Add(d)
	for round := 1; time.Now().Before(end); round++ {
		ok := t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			page := []string{"4k", "8k", "16k", "32k", "64k"}[rng.IntN(5)]
			s := testdb.Start(t, testdb.Options{LogFileSize: "256M", Args: []string{"--innodb-page-size=" + page}})
			picked := []string{}
			for _, f := range formats {
				compressedOK := page != "32k" && page != "64k" // ROW_FORMAT=COMPRESSED needs pages <= 16k
				if rng.IntN(2) == 0 && (f != "ROW_FORMAT=COMPRESSED" || compressedOK) {
					picked = append(picked, f)
				}
			}
			if len(picked) == 0 {
				picked = formats[:1]
			}
			r := differential(t, s, picked, time.Duration(1+rng.IntN(20))*time.Second, rng)
			t.Logf("page size %s, formats %v: %d pages compared, %d decoded", page, picked, r.Compared, r.Decoded)
		})
		if !ok {
			return
		}
	}
}

// result is a differential run's report and the natively prepared copy.
type result struct {
	pagediff.Report
	native string
}

// differential creates one table per format on s, runs churn on them for load while
// mariadb-backup copies the server, prepares the copy both ways and compares them.
func differential(t *testing.T, s *testdb.Server, formats []string, load time.Duration, rng *rand.Rand) result {
	t.Helper()
	db := s.DB(t)
	for i, f := range formats {
		mustExec(t, db, fmt.Sprintf("CREATE TABLE test.t%d (id INT AUTO_INCREMENT PRIMARY KEY, k INT, v VARCHAR(200), b BLOB, KEY(k)) %s", i, f))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- churn(ctx, db, len(formats), rng.Uint64()) }()
	time.Sleep(load)
	dir := filepath.Join(t.TempDir(), "b")
	if out, err := exec.Command("mariadb-backup", "--backup", "--socket="+s.Socket, "--user=root", "--target-dir="+dir).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --backup: %v\n%s", err, out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	oracle, native, batched := copyDir(t, dir, "oracle"), copyDir(t, dir, "native"), copyDir(t, dir, "batched")
	if out, err := exec.Command("mariadb-backup", "--prepare", "--target-dir="+oracle).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --prepare: %v\n%s", err, out)
	}
	prepareNative(t, native)
	// In batches of 256 KiB of records, with another parallelism and every tablespace
	// closed between batches (OpenFiles 1): the same bytes.
	// (Tables created after the checkpoint are t.new in mariadb-backup's copy; restore
	// renames them before it applies, so the test does too.)
	renameNew(t, batched)
	res, err := apply.Dir(context.Background(), apply.Config{Dir: batched, Memory: 256 << 10, Parallel: 3, OpenFiles: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Batches < 2 {
		t.Fatalf("%d batches of 256 KiB for %d bytes of redo", res.Batches, res.RedoBytes)
	}
	// Every tablespace the redo changes is in the file the redo names it by: none of
	// the datadir's files is read to find one.
	if res.Scanned || res.Spaces == 0 {
		t.Fatalf("the apply scanned the datadir (%v) or wrote no tablespace (%d)", res.Scanned, res.Spaces)
	}
	hist, err := apply.ReadHistory(filepath.Join(dir, "ib_logfile0"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := pagediff.CodecDecoder(oracle, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	opt := pagediff.Options{Decode: dec, Explain: hist}
	// Batches differ only in freed pages (a page freed in a later batch keeps what an
	// earlier one wrote, as in the server's own multi-batch recovery), which are ignored.
	rb, err := pagediff.Dirs(native, batched, opt)
	if err == nil {
		err = rb.Err()
	}
	if err != nil {
		t.Fatalf("in batches: %v", err)
	}
	r, err := pagediff.Dirs(oracle, native, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Compared == 0 {
		t.Fatal("no page compared")
	}
	return result{Report: r, native: native}
}

// churn inserts, updates and deletes rows of tables t0..t(n-1) until ctx ends.
func churn(ctx context.Context, db *sql.DB, n int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := 0; ctx.Err() == nil; i++ {
		t := fmt.Sprintf("test.t%d", rng.IntN(n))
		q := []string{
			fmt.Sprintf("INSERT INTO %s (k, v, b) VALUES (%d, REPEAT('x', %d), NULL), (%d, 'y', REPEAT('b', %d)), (%d, REPEAT('z', 150), NULL)", t, i%97, rng.IntN(200), i%13, rng.IntN(3000), i),
			fmt.Sprintf("UPDATE %s SET v = REPEAT('u', %d), k = k + 1 WHERE id %% 7 = %d", t, rng.IntN(200), i%7),
			fmt.Sprintf("DELETE FROM %s WHERE id %% 11 = %d LIMIT %d", t, i%11, 1+rng.IntN(5)),
		}
		stmt := q[rng.IntN(len(q))]
		if _, err := db.ExecContext(ctx, stmt); err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// TestAppliedCopyStarts rolls a backup of an idle server forward and starts the stock
// server on it: the empty log ferry writes is one the server starts on with nothing to
// recover.
func TestAppliedCopyStarts(t *testing.T) {
	s := testdb.Start(t, testdb.Options{})
	mustExec(t, s.DB(t), "CREATE TABLE test.t (id INT PRIMARY KEY) ENGINE=InnoDB")
	dir := filepath.Join(t.TempDir(), "b")
	if out, err := exec.Command("mariadb-backup", "--backup", "--socket="+s.Socket, "--user=root", "--target-dir="+dir).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --backup: %v\n%s", err, out)
	}
	prepareNative(t, dir)
	s2 := testdb.Start(t, testdb.Options{Datadir: dir})
	var n int
	if err := s2.DB(t).QueryRow("SELECT COUNT(*) FROM test.t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(s2.ErrorLog)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "Starting crash recovery") || strings.Contains(string(log), "to recover") {
		t.Fatalf("the server recovered the applied copy:\n%s", log)
	}
}

// renameNew renames the X.new files of a mariadb-backup copy (tablespaces created
// during the copy) to X.ibd.
func renameNew(t *testing.T, dir string) {
	t.Helper()
	news, _ := filepath.Glob(filepath.Join(dir, "*", "*.new"))
	for _, p := range news {
		if err := os.Rename(p, strings.TrimSuffix(p, ".new")+".ibd"); err != nil {
			t.Fatal(err)
		}
	}
}

// mustExec runs statements or fails the test.
func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// copyDir copies a backup directory (cp -a) to a new dir named name.
func copyDir(t *testing.T, src, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

// prepareNative prepares a backup directory with ferry's native apply only.
func prepareNative(t *testing.T, dir string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	if err := restore.Prepare(context.Background(), restore.PrepareConfig{Dir: dir, Recovery: restore.RecoveryNative, Log: log}); err != nil {
		t.Fatal(err)
	}
}

// testWriter sends log lines to the test log.
type testWriter struct{ t *testing.T }

// Write logs one line.
func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
