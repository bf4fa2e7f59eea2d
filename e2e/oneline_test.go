//go:build e2e

package e2e

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestOneLine (issue 22, findings 7, 8 and 11): the paths around the copy end with one
// line that says what to do, and a restore run as root gives a datadir the stock
// service starts. On one small server and one directory backup:
//   - a directory restore interrupted by SIGINT (SIGTERM) mid-way ends with one line
//     naming the signal, no "context canceled", exit status 130 (143), and the backup
//     and the datadir's place as they were;
//   - --target-dir on the command line wins over repo= in [ferry] of the option file,
//     and over the identity-file and resume that go with it;
//   - run as root, a new datadir under a root-owned parent is owned by the mysql user,
//     and the start hint says so;
//   - restore --tables db.nosuch is refused before any data moves;
//   - a missing repository directory says to create it;
//   - a backup to a directory on a filesystem too small is refused before it writes,
//     naming what it needs, what is free and where.
func TestOneLine(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{})
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY, pad CHAR(200)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO shop.t SELECT seq, REPEAT('x', 200) FROM mysql.seq_1_to_5000")
	tmp := testdb.ShortDir(t)
	bk := filepath.Join(tmp, "bk")
	mustFerry(t, backupArgs(src, bk)...)

	for _, c := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}} {
		t.Run("restore interrupted by "+c.name, func(t *testing.T) {
			datadir := filepath.Join(tmp, "int-"+c.name)
			stderr, code := interruptRestore(t, c.sig, "restore", "--target-dir", bk, "--datadir", datadir)
			last := lastLine(stderr)
			if code != c.code || !strings.HasPrefix(last, "ferry: interrupted by "+c.name) || strings.Contains(last, "context canceled") {
				t.Fatalf("exit status %d, last line %q: want %d and one line 'ferry: interrupted by %s' without 'context canceled'\n%s", code, last, c.code, c.name, tail(stderr, 15))
			}
			if _, err := os.Stat(datadir); !os.IsNotExist(err) {
				t.Errorf("the interrupted restore left %s (%v)", datadir, err)
			}
			if _, err := os.Stat(filepath.Join(bk, "ibdata1")); err != nil {
				t.Errorf("the interrupted copy restore touched the backup: %v", err)
			}
		})
	}

	t.Run("command line over option file", func(t *testing.T) {
		cnf := writeFile(t, tmp, "my.cnf", "[ferry]\nrepo="+filepath.Join(tmp, "repo")+"\n[ferry-restore]\nlog-level=debug\nidentity-file="+filepath.Join(tmp, "key.txt")+"\nresume\n")
		out := mustFerry(t, "restore", "--defaults-file", cnf, "--target-dir", bk, "--datadir", filepath.Join(tmp, "restored"))
		if !strings.Contains(out.stderr, "option repo in [ferry] of the option files not applied") {
			t.Errorf("the skipped option file value is not logged at debug level:\n%s", tail(out.stderr, 20))
		}
	})

	t.Run("owner of a new datadir", func(t *testing.T) {
		u, err := user.Lookup("mysql")
		if os.Geteuid() != 0 || err != nil {
			if os.Getenv("CI") != "" { // .ci/run installs mariadb-server (the mysql user) and runs as root
				t.Fatalf("CI needs this case: not root or no mysql user (%v)", err)
			}
			t.Skipf("not root or no mysql user (%v)", err)
		}
		if st, _ := os.Stat(tmp); st.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Fatalf("%s is not root-owned", tmp)
		}
		datadir := filepath.Join(tmp, "owned")
		out := mustFerry(t, "restore", "--target-dir", bk, "--datadir", datadir)
		t.Log(out.stdout)
		uid, _ := strconv.Atoi(u.Uid)
		for _, p := range []string{datadir, filepath.Join(datadir, "ibdata1"), filepath.Join(datadir, "shop", "t.ibd")} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Sys().(*syscall.Stat_t).Uid; int(got) != uid {
				t.Errorf("%s is owned by uid %d, want the mysql user's %d", p, got, uid)
			}
		}
		if !strings.Contains(out.stdout, "owned by mysql:") || !strings.Contains(out.stdout, "(the mysql user). Start it with:") {
			t.Errorf("the start hint does not say who owns the datadir:\n%s", out.stdout)
		}
	})

	t.Run("a table the backup lacks", func(t *testing.T) {
		start := time.Now()
		r := wantFail(t, nil, "shop.nosuch is not in the backup", "restore", "--target-dir", bk, "--tables", "shop.nosuch", "--rename-to", "x",
			"--into-server", "--socket", src.Socket, "--user", "root")
		if strings.Contains(r.stderr, "restoring only the files the tables need") || strings.Contains(r.stderr, "prepar") {
			t.Errorf("refused only after data moved:\n%s", tail(r.stderr, 10))
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the refusal took %v", d)
		}
		ents, _ := os.ReadDir(filepath.Dir(filepath.Clean(src.Datadir)))
		for _, e := range ents {
			if strings.Contains(e.Name(), "ferry-") {
				t.Errorf("left beside the live datadir: %s", e.Name())
			}
		}
	})

	t.Run("missing repository directory", func(t *testing.T) {
		missing := filepath.Join(tmp, "no-repo")
		wantFail(t, nil, "repository directory "+missing+" does not exist: check the path, or create the directory", "list", "--repo", missing)
	})

	t.Run("backup to a directory too small", func(t *testing.T) {
		mnt := filepath.Join(tmp, "small")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		mountTmpfs(t, mnt, "4m")
		r := wantFail(t, nil, "not enough free disk space for the backup (the server's files", backupArgs(src, filepath.Join(mnt, "bk"))...)
		for _, want := range []string{"needed", "free", "in " + mnt} {
			if !strings.Contains(lastLine(r.stderr), want) {
				t.Errorf("the refusal %q does not say %q", lastLine(r.stderr), want)
			}
		}
		if ents, _ := os.ReadDir(mnt); len(ents) != 0 {
			t.Errorf("the refused backup wrote %d entries into %s", len(ents), mnt)
		}
	})
}

// interruptRestore starts ferry with args, sends it sig once it has filled its staging
// directory and stops where the redo apply starts (the pause point recovery=1: a
// restore of a small backup is otherwise over before a signal lands), and returns its
// stderr and exit status. A staging directory left behind must be named by the last line.
func interruptRestore(t *testing.T, sig syscall.Signal, args ...string) (string, int) {
	t.Helper()
	var datadir string
	for i, a := range args {
		if a == "--datadir" {
			datadir = args[i+1]
		}
	}
	staging := filepath.Join(filepath.Dir(datadir), "."+filepath.Base(datadir)+".ferry-staging-*")
	cmd, logPath := pausedFerry(t, "recovery=1", args...)
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("ferry did not end within a minute of %v", sig)
	}
	b, _ := os.ReadFile(logPath)
	out := string(b)
	t.Logf("ferry %s, sent %v: exit status %d, %s", strings.Join(args, " "), sig, cmd.ProcessState.ExitCode(), lastLine(out))
	if m, _ := filepath.Glob(staging); len(m) > 0 && !strings.Contains(lastLine(out), m[0]) {
		t.Errorf("the interrupted restore left its staging directory %v without naming it", m)
	}
	return out, cmd.ProcessState.ExitCode()
}
