package apply_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestMatchesMariabackupPrepare takes a mariadb-backup copy of a server under a mixed
// write load (DYNAMIC, REDUNDANT and COMPRESSED tables, deletes, a small redo log),
// prepares one copy with mariadb-backup --prepare and rolls another forward with Dir,
// and compares every page of every tablespace the redo changed.
func TestMatchesMariabackupPrepare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	s := testdb.Start(t, testdb.Options{})
	db := s.DB(t)
	for _, f := range []string{"DYNAMIC", "REDUNDANT", "COMPACT", "COMPRESSED"} {
		mustExec(t, db, fmt.Sprintf("CREATE TABLE test.t_%s (id INT AUTO_INCREMENT PRIMARY KEY, k INT, v VARCHAR(200), KEY(k)) ROW_FORMAT=%s", f, f))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- churn(ctx, db) }()
	time.Sleep(2 * time.Second)
	dir := filepath.Join(t.TempDir(), "b")
	if out, err := exec.Command("mariadb-backup", "--backup", "--socket="+s.Socket, "--user=root", "--target-dir="+dir).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --backup: %v\n%s", err, out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	oracle, native := copyDir(t, dir, "oracle"), copyDir(t, dir, "native")
	if out, err := exec.Command("mariadb-backup", "--prepare", "--target-dir="+oracle).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --prepare: %v\n%s", err, out)
	}
	prepareNative(t, native)
	compareDirs(t, oracle, native)
	s2 := testdb.Start(t, testdb.Options{Datadir: native})
	var n int
	if err := s2.DB(t).QueryRow("SELECT COUNT(*) FROM test.t_DYNAMIC").Scan(&n); err != nil {
		t.Fatal(err)
	}
}

// churn inserts, updates and deletes rows in the four tables until ctx ends.
func churn(ctx context.Context, db *sql.DB) error {
	for i := 0; ctx.Err() == nil; i++ {
		for _, f := range []string{"DYNAMIC", "REDUNDANT", "COMPACT", "COMPRESSED"} {
			q := []string{
				fmt.Sprintf("INSERT INTO test.t_%s (k, v) VALUES (%d, REPEAT('x', %d)), (%d, 'y'), (%d, REPEAT('z', 150))", f, i%97, i%180, i%13, i),
				fmt.Sprintf("UPDATE test.t_%s SET v = REPEAT('u', %d), k = k + 1 WHERE id %% 7 = %d", f, i%190, i%7),
				fmt.Sprintf("DELETE FROM test.t_%s WHERE id %% 11 = %d LIMIT 3", f, i%11),
			}
			for _, stmt := range q {
				if _, err := db.ExecContext(ctx, stmt); err != nil && ctx.Err() == nil {
					return fmt.Errorf("%s: %w", stmt, err)
				}
			}
		}
	}
	return nil
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

// compareDirs compares every page of every .ibd and ibdata1 in a and b.
func compareDirs(t *testing.T, a, b string) {
	t.Helper()
	var bad []string
	err := filepath.Walk(a, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, path)
		if !strings.HasSuffix(rel, ".ibd") && rel != "ibdata1" && !strings.HasPrefix(rel, "undo") {
			return nil
		}
		x, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		bad = append(bad, comparePages(rel, x, y)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("... %d more", len(bad)-20))
		}
		t.Fatalf("native apply differs from mariadb-backup --prepare:\n%s", strings.Join(bad, "\n"))
	}
}

// comparePages lists the pages of one tablespace file that differ.
func comparePages(rel string, x, y []byte) []string {
	if len(x) != len(y) {
		return []string{fmt.Sprintf("%s: %d bytes, native %d", rel, len(x), len(y))}
	}
	h, err := innodb.ParseSpaceHeader(x)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", rel, err)}
	}
	ps := h.Flags.PhysicalSize()
	var bad []string
	for off := 0; off+ps <= len(x); off += ps {
		p, q := x[off:off+ps], y[off:off+ps]
		if bytes.Equal(p, q) {
			continue
		}
		i := 0
		for p[i] == q[i] {
			i++
		}
		bad = append(bad, fmt.Sprintf("%s page %d: first difference at byte %d (%#02x, native %#02x); page LSN %d, native %d; type %d",
			rel, off/ps, i, p[i], q[i], innodb.PageLSN(p), innodb.PageLSN(q), innodb.PageType(p)))
	}
	return bad
}

// TestAppliedCopyStarts rolls a backup of an idle server forward and starts the stock
// server on it: the empty log ferry writes is one the server starts on with nothing to
// recover.
func TestAppliedCopyStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
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
