//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestBackupUserGrants: a backup user with exactly the documented grants (RELOAD,
// PROCESS, BINLOG MONITOR) takes a directory backup without a warning: the three-stage
// copy reads the server's checkpoints and needs no more privileges (on this idle server
// it skips its rounds and says so); --full-redo turns it off. Both backups restore to
// the source's checksums.
func TestBackupUserGrants(t *testing.T) {
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	src.Exec(t, "CREATE USER bk@localhost IDENTIFIED BY 'bkpw'")
	src.Exec(t, "GRANT RELOAD, PROCESS, BINLOG MONITOR ON *.* TO bk@localhost")
	want := testdb.Checksums(t, src.DB(t))
	tmp := testdb.ShortDir(t)
	pw := filepath.Join(tmp, "pw")
	if err := os.WriteFile(pw, []byte("bkpw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	backupAs := func(t *testing.T, name string, extra ...string) string {
		dir := filepath.Join(tmp, name)
		args := append([]string{"backup", "--socket", src.Socket, "--user", "bk", "--password-file", pw, "--target-dir", dir}, extra...)
		out := mustFerry(t, args...)
		datadir := filepath.Join(tmp, "restored-"+name)
		mustFerry(t, "restore", "--target-dir", dir, "--datadir", datadir)
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
		compareChecksums(t, want, testdb.Checksums(t, s.DB(t)))
		return out.stderr
	}
	t.Run("documented grants", func(t *testing.T) {
		// The server is idle: the checkpoint does not move, so no round pays. What
		// matters is that nothing asks for more privileges.
		if log := backupAs(t, "plain"); strings.Contains(log, "level=WARN") || !strings.Contains(log, "three-stage copy skipped") {
			t.Errorf("with the documented grants, a warning, or no word of the three-stage copy:\n%s", tail(log, 20))
		}
	})
	t.Run("--full-redo", func(t *testing.T) {
		log := backupAs(t, "full", "--full-redo")
		if n := recopyRounds(t, log); n != 0 || !strings.Contains(log, "three-stage copy off (the whole redo was asked for)") {
			t.Errorf("--full-redo: %d re-copy rounds:\n%s", n, tail(log, 20))
		}
	})
}
