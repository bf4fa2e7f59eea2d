//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestNativeChainAtScale (FERRY_CHAIN_SCALE=1, not in CI: minutes) restores a chain of
// ferry incrementals of three 300k-row tables changed at random places during every
// backup, natively, and compares it page for page with mariadb-backup's chain prepare.
func TestNativeChainAtScale(t *testing.T) {
	if os.Getenv("FERRY_CHAIN_SCALE") == "" {
		t.Skip("set FERRY_CHAIN_SCALE=1")
	}
	src := testdb.Start(t, testdb.Options{LogFileSize: "1G"})
	db := src.DB(t)
	for i := range 3 {
		src.Exec(t, fmt.Sprintf("CREATE TABLE test.t%d (id INT AUTO_INCREMENT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60), KEY(k))", i))
		src.Exec(t, fmt.Sprintf("INSERT INTO test.t%d (k, c, pad) SELECT seq, REPEAT('c', 120), REPEAT('p', 60) FROM test.seq_1_to_300000", i))
	}
	tmp := testdb.ShortDir(t)
	var dirs []string
	for link := range 4 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 2)
		for w := range 2 {
			go func() { done <- scatter(ctx, db, uint64(link*10+w)) }()
		}
		time.Sleep(5 * time.Second)
		dir := filepath.Join(tmp, "b"+strconv.Itoa(link))
		args := backupArgs(src, dir)
		if link > 0 {
			args = append(args, "--incremental-basedir", dirs[link-1])
		}
		mustFerry(t, args...)
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		dirs = append(dirs, dir)
	}
	checkNativeChain(t, dirs[0], dirs[1:])
}

// scatter updates, deletes and re-inserts rows at random places, as sysbench
// oltp_write_only does.
func scatter(ctx context.Context, db *sql.DB, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 11))
	for ctx.Err() == nil {
		t, id := rng.IntN(3), 1+rng.IntN(300000)
		qs := []string{
			fmt.Sprintf("UPDATE test.t%d SET k = k + 1 WHERE id = %d", t, id),
			fmt.Sprintf("UPDATE test.t%d SET c = REPEAT('%c', 120) WHERE id = %d", t, 'a'+rng.IntN(26), id),
			fmt.Sprintf("DELETE FROM test.t%d WHERE id = %d", t, id),
			fmt.Sprintf("INSERT IGNORE INTO test.t%d (id, k, c, pad) VALUES (%d, %d, REPEAT('n', 120), REPEAT('q', 60))", t, id, rng.IntN(300000)),
		}
		for _, q := range qs[rng.IntN(2):] {
			if _, err := db.ExecContext(ctx, q); err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
	}
	return nil
}
