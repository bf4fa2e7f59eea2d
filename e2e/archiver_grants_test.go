//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestArchiverGrants: the binlog archiver run by a user without REPLICATION SLAVE, or
// without BINLOG MONITOR, exits non-zero within seconds with one line naming the
// missing grant and the GRANT statement that adds it, instead of reconnecting for
// ever; a refused password, and an account whose host does not match the address the
// archiver connects from, stop it the same way. With the two documented grants it
// follows the binlog and stops cleanly on SIGTERM.
func TestArchiverGrants(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE TABLE test.t (id INT PRIMARY KEY)")
	src.Exec(t, "INSERT INTO test.t VALUES (1), (2)")
	tmp := testdb.ShortDir(t)
	pw := filepath.Join(tmp, "pw")
	if err := os.WriteFile(pw, []byte("archpw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	user := func(name, grants string) {
		src.Exec(t, "CREATE USER "+name+"@localhost IDENTIFIED BY 'archpw'")
		if grants != "" {
			src.Exec(t, "GRANT "+grants+" ON *.* TO "+name+"@localhost")
		}
	}
	user("norepl", "BINLOG MONITOR")
	user("nomon", "REPLICATION SLAVE")
	user("granted", "REPLICATION SLAVE, BINLOG MONITOR")
	args := func(name, repo string) []string {
		if err := os.MkdirAll(filepath.Join(tmp, repo), 0o750); err != nil {
			t.Fatal(err)
		}
		return []string{"binlog-archive", "--repo", filepath.Join(tmp, repo), "--socket", src.Socket, "--user", name,
			"--password-file", pw, "--retry-max", "1s", "--log-level", "debug", "--status-every", "200ms"}
	}
	// An account for another host only: over TCP from 127.0.0.1, which no account
	// names once root's is gone (the harness uses the socket), the server answers 1130
	// (host not allowed) at connect.
	src.Exec(t, "DROP USER IF EXISTS root@'127.0.0.1', root@'::1'")
	src.Exec(t, "CREATE USER elsewhere@'10.0.0.1' IDENTIFIED BY 'archpw'")
	src.Exec(t, "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO elsewhere@'10.0.0.1'")
	tcp := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(src.Port)}
	for _, c := range []struct {
		name, user, want string
		extra            []string
	}{
		{"no REPLICATION SLAVE", "norepl", "GRANT REPLICATION SLAVE ON *.* TO", nil},
		{"no BINLOG MONITOR", "nomon", "GRANT BINLOG MONITOR ON *.* TO", nil},
		{"bad password", "nosuch", "access denied", nil},
		{"host not allowed", "elsewhere", "is not allowed to connect", tcp},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			res := ferryWithin(t, 20*time.Second, append(args(c.user, "repo-"+c.user), c.extra...)...)
			took := time.Since(start)
			if res.err == nil {
				t.Fatalf("the archiver exited 0:\n%s", tail(res.stderr, 20))
			}
			if strings.Contains(res.stderr, "panic:") {
				t.Fatalf("panic:\n%s", res.stderr)
			}
			last := lastLine(res.stderr)
			if !strings.HasPrefix(last, "ferry: ") || !strings.Contains(last, c.want) {
				t.Fatalf("after %v, last line %q, want a 'ferry: ' line containing %q:\n%s", took.Round(time.Millisecond), last, c.want, tail(res.stderr, 20))
			}
			if strings.Contains(res.stderr, "reconnecting") {
				t.Errorf("the archiver retried a missing grant:\n%s", tail(res.stderr, 20))
			}
			t.Logf("exited after %v: %s", took.Round(time.Millisecond), last)
		})
	}
	// The second run resumes: it checks the archive's last event against the server's
	// (SHOW BINLOG EVENTS) with the same grants.
	t.Run("documented grants", func(t *testing.T) {
		for run := range 2 {
			src.Exec(t, "INSERT INTO test.t VALUES (?)", 10+run)
			archiveUntilStored(t, filepath.Join(tmp, fmt.Sprintf("granted-%d.log", run)), args("granted", "repo-granted"))
		}
	})
}

// archiveUntilStored runs the archiver until it stores a segment, then stops it with
// SIGTERM, which must end it with status 0.
func archiveUntilStored(t testing.TB, log string, args []string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(ferryBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "binlog-archive: stored") && strings.Contains(string(b), "binlog-archive: archiving") {
			break // it stored a segment, and said so in a status line
		}
		select {
		case err := <-exited:
			t.Fatalf("the archiver exited (%v) before storing anything:\n%s", err, tail(string(b), 20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("nothing stored within 20 s:\n%s", tail(string(b), 20))
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		b, _ := os.ReadFile(log)
		t.Fatalf("SIGTERM: %v\n%s", err, tail(string(b), 20))
	}
	b, _ := os.ReadFile(log)
	for _, want := range []string{`msg="binlog-archive: started"`, `msg="binlog-archive: archiving" stored_bytes=`, `msg="binlog-archive: stopped; what was received is stored"`, ` at=mysql-bin.`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the archiver's log lacks %q:\n%s", want, tail(string(b), 20))
		}
	}
}

// ferryWithin runs ferry and kills it after d: a run that has not ended by then is
// reported as such, not waited for.
func ferryWithin(t testing.TB, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ferry %s still running after %v:\n%s", strings.Join(args, " "), d, tail(errb.String(), 20))
	}
	return result{out.String(), errb.String(), err}
}
