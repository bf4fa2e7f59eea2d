//go:build e2e

package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/pagediff"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestApplyProfile builds a backup with a lot of redo (FERRY_APPLY_PROFILE=seconds of
// load) and applies it, for go test -cpuprofile: where the apply's time goes.
func TestApplyProfile(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("FERRY_APPLY_PROFILE"))
	if err != nil {
		t.Skip("set FERRY_APPLY_PROFILE to a load duration")
	}
	dir := spreadBackup(t, d)
	renameNew(t, dir)
	for _, par := range []int{2, 0} {
		cp := copyDir(t, dir, fmt.Sprintf("p%d", par))
		if os.Getenv("FERRY_APPLY_PROFILE_COLD") != "" {
			exec.Command("sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches").Run()
		}
		t0 := time.Now()
		res, err := apply.Dir(context.Background(), apply.Config{Dir: cp, Parallel: par})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("parallel %d: %d MB of redo, %d pages, %d batches in %v (check %v, roll %v)", par, res.RedoBytes>>20, res.Pages, res.Batches, time.Since(t0), res.Check, res.Roll)
	}
}

// spread updates, deletes and inserts single rows at random places of t0..t2, so that
// the redo touches many pages (as sysbench oltp_write_only does).
func spread(ctx context.Context, db *sql.DB, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 5))
	for ctx.Err() == nil {
		t, id := rng.IntN(3), 1+rng.IntN(300000)
		var q string
		switch rng.IntN(4) {
		case 0:
			q = fmt.Sprintf("DELETE FROM test.t%d WHERE id = %d", t, id)
		case 1:
			q = fmt.Sprintf("INSERT INTO test.t%d (k, v) VALUES (%d, REPEAT('i', %d))", t, id, rng.IntN(150))
		default:
			q = fmt.Sprintf("UPDATE test.t%d SET k = k + 1, v = REPEAT('u', %d) WHERE id = %d", t, rng.IntN(150), id)
		}
		if _, err := db.ExecContext(ctx, q); err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// TestApplySpreadDifferential is the differential check on the spread workload (many
// pages of three 300k-row tables changed at random, as sysbench does): set
// FERRY_APPLY_SPREAD to the load's duration.
func TestApplySpreadDifferential(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("FERRY_APPLY_SPREAD"))
	if err != nil {
		t.Skip("set FERRY_APPLY_SPREAD to a load duration")
	}
	dir := spreadBackup(t, d)
	oracle, native := copyDir(t, dir, "oracle"), copyDir(t, dir, "native")
	if out, err := exec.Command("mariadb-backup", "--prepare", "--target-dir="+oracle).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --prepare: %v\n%s", err, out)
	}
	renameNew(t, native)
	res, err := apply.Dir(context.Background(), apply.Config{Dir: native, Memory: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MB of redo, %d pages, %d batches", res.RedoBytes>>20, res.Pages, res.Batches)
	hist, err := apply.ReadHistory(filepath.Join(dir, "ib_logfile0"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := pagediff.Dirs(oracle, native, pagediff.Options{Explain: hist})
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pages compared", r.Compared)
}

// spreadBackup fills three 300k-row tables (one per row format), runs the spread load on
// them for d and takes a mariadb-backup copy of the server under that load.
func spreadBackup(t *testing.T, d time.Duration) string {
	t.Helper()
	s := testdb.Start(t, testdb.Options{LogFileSize: "2G"})
	db := s.DB(t)
	for i, f := range formats[:3] {
		mustExec(t, db, fmt.Sprintf("CREATE TABLE test.t%d (id INT AUTO_INCREMENT PRIMARY KEY, k INT, v VARCHAR(200), b BLOB, KEY(k)) %s", i, f))
		mustExec(t, db, fmt.Sprintf("INSERT INTO test.t%d (k, v) SELECT seq, REPEAT('p', 100) FROM test.seq_1_to_300000", i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for w := range 2 {
		go func() { done <- spread(ctx, db, uint64(w)+rand.Uint64()) }()
	}
	time.Sleep(d)
	dir := filepath.Join(t.TempDir(), "b")
	out, err := exec.Command("mariadb-backup", "--backup", "--socket="+s.Socket, "--user=root", "--target-dir="+dir).CombinedOutput()
	cancel()
	for range 2 {
		if lerr := <-done; lerr != nil {
			t.Fatal(lerr)
		}
	}
	if err != nil {
		t.Fatalf("mariadb-backup --backup: %v\n%s", err, out)
	}
	return dir
}
