//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestVerifyEveryBackup: ferry verify --repo R with no backup id verifies every backup
// of a directory repository (a full one, an incremental on it and a newer full one)
// and says so in one summary line; once a byte of the oldest backup's largest object is
// flipped, it exits non-zero naming that backup and the incremental that applies on it,
// while the newer full backup still verifies.
func TestVerifyEveryBackup(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY, pad CHAR(200)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO shop.t SELECT seq, REPEAT(MD5(seq), 6) FROM shop.seq_1_to_5000")
	dir := filepath.Join(testdb.ShortDir(t), "repo")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	backup := func(extra ...string) string {
		return strings.TrimSpace(mustFerry(t, repoBackupArgs(src, dir, extra...)...).stdout)
	}
	old := backup()
	src.Exec(t, "UPDATE shop.t SET pad = REPEAT('x', 200) WHERE id % 10 = 0")
	inc := backup("--incremental")
	newer := backup()

	out := mustFerry(t, "verify", "--repo", dir).stdout
	if want := "verified 3 backups (2 full, 1 incremental) and no binlog archive: 3 OK, 0 FAILED"; !strings.Contains(out, want) {
		t.Fatalf("verify of the whole repository does not say %q:\n%s", want, out)
	}

	objs, err := filepath.Glob(filepath.Join(dir, "backups", old, "objects", "*"))
	if err != nil || len(objs) == 0 {
		t.Fatalf("objects of %s: %v", old, err)
	}
	sort.Slice(objs, func(a, b int) bool { return fileSize(objs[a]) > fileSize(objs[b]) })
	b, err := os.ReadFile(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(objs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	res := wantFail(t, nil, old+", "+inc, "verify", "--repo", dir)
	wantExit(t, res, 5) // some backups bad, the others good: partial
	t.Logf("verify:\n%s", res.stdout)
	for _, want := range []string{
		"FAILED: backup " + old + " failed verification: object backups/" + old + "/objects/" + filepath.Base(objs[0]),
		"FAILED: backup " + inc + " cannot be restored: " + old + " of its chain failed verification",
		"backup " + newer + " OK",
		"verified 3 backups (2 full, 1 incremental) and no binlog archive: 1 OK, 2 FAILED: " + old + ", " + inc,
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("verify does not say %q:\n%s", want, res.stdout)
		}
	}
	// One backup by id is verified as before.
	mustFerry(t, "verify", "--repo", dir, newer)
	wantFail(t, nil, old, "verify", "--repo", dir, inc)
}
