//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestPointInTime: ferry binlog-archive follows a source under the bank, non-InnoDB
// and DDL workloads into an S3 repository while a full backup is taken. The archiver
// is killed with SIGKILL and restarted under load, and the source server is restarted
// while it runs; afterwards every archived binlog file equals the server's own, byte
// for byte (so no event is missing or stored twice). A restore to a GTID in the middle
// of the load ends exactly at that GTID, and a restore to a time ends at the last
// transaction the server's own binlog (read by mariadb-binlog) shows at or before it;
// both hold the workloads' invariants, replicate on from there and match the source's
// checksums. Bad input gets one line each, a binlog purged while the archiver was down
// becomes a recorded gap that list and verify report and a restore refuses to cross,
// and another server behind the address stops the archiver with an error.
func TestPointInTime(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	mbinlog, err := exec.LookPath("mariadb-binlog")
	if err != nil {
		t.Fatal("mariadb-binlog is not installed (it comes with mariadb-client; .ci/run installs it)")
	}
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 5000)
	s3 := newS3Repo(t, "ferry-pitr", "db1")
	tmp := testdb.ShortDir(t)
	archive := func() *exec.Cmd {
		return startFerry(t, s3.env, "binlog-archive", "--repo", s3.url, "--socket", src.Socket, "--user", "root",
			"--compress", "none", "--flush-interval", "200ms", "--merge-every", "2s", "--retry-max", "1s", "--log-level", "debug")
	}

	// No repository yet: the archiver creates it, as a backup would.
	arch := archive()
	load.Start()
	time.Sleep(time.Second)
	s3.run(t, repoBackupArgs(src, s3.url)...)
	time.Sleep(1500 * time.Millisecond)
	mid := testdb.GTIDForDomain(src.QueryString(t, "SELECT @@gtid_binlog_pos"), 7)
	// kill -9 of the archiver under load, and a restart.
	arch.Process.Kill()
	arch.Wait()
	time.Sleep(time.Second)
	arch = archive()
	time.Sleep(1200 * time.Millisecond)
	at := time.Now().UTC().Truncate(time.Second)
	time.Sleep(1500 * time.Millisecond)
	load.Stop(t)
	// The source restarts while the archiver runs; it reconnects and goes on.
	src.Stop(t)
	src.Restart(t)
	load.Bank.SetDB(src.DB(t))
	moreTransfers(t, load, 300*time.Millisecond)
	want := testdb.Checksums(t, src.DB(t))
	waitArchived(t, s3, src)
	checkSameBytes(t, s3, src)

	t.Run("gtid", func(t *testing.T) {
		datadir := filepath.Join(tmp, "to-gtid")
		out := s3.run(t, "restore", "--repo", s3.url, "--to-gtid", mid, "--datadir", datadir)
		gtid := restoredGTID(t, out.stdout)
		if got := testdb.GTIDForDomain(gtid, 7); got != mid {
			t.Fatalf("restore to %s says it ends at %s", mid, gtid)
		}
		checkReplica(t, src, load, datadir, gtid, want)
	})
	t.Run("time", func(t *testing.T) {
		wantBank := lastBankGTIDAt(t, mbinlog, src, at)
		datadir := filepath.Join(tmp, "to-time")
		out := s3.run(t, "restore", "--repo", s3.url, "--to-time", at.Format(time.RFC3339), "--datadir", datadir)
		gtid := restoredGTID(t, out.stdout)
		if got := testdb.GTIDForDomain(gtid, 7); got != wantBank {
			t.Fatalf("restore to %s ends the bank at %s, the server's binlog has %s as its last transfer at or before it", at, got, wantBank)
		}
		checkReplica(t, src, load, datadir, gtid, want)
	})
	t.Run("refusals", func(t *testing.T) {
		datadir := filepath.Join(tmp, "refused")
		early := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
		wantFail(t, s3.env, "before the oldest backup", "restore", "--repo", s3.url, "--to-time", early, "--datadir", datadir)
		wantFail(t, s3.env, "not in the binlog archive", "restore", "--repo", s3.url, "--to-gtid", "7-1-99999999", "--datadir", datadir)
		late := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		wantFail(t, s3.env, "past what the binlog archive shows", "restore", "--repo", s3.url, "--to-time", late, "--datadir", datadir)
		wantFail(t, s3.env, "not domain-server-sequence", "restore", "--repo", s3.url, "--to-gtid", "7-x", "--datadir", datadir)
		wantFail(t, nil, "restore from --repo", "restore", "--target-dir", tmp, "--to-gtid", mid, "--datadir", datadir)
		noArchive := filepath.Join(tmp, "plain-repo")
		dirRepoBackup(t, src, noArchive)
		wantFail(t, nil, "has no binlog archive", "restore", "--repo", noArchive, "--to-gtid", "7-1-99999999", "--datadir", datadir)
		noDatadir(t, datadir)
	})
	t.Run("gap", func(t *testing.T) {
		arch.Process.Signal(os.Interrupt)
		arch.Wait()
		moreTransfers(t, load, 300*time.Millisecond)
		src.Exec(t, "FLUSH BINARY LOGS")
		lost := testdb.GTIDForDomain(src.QueryString(t, "SELECT @@gtid_binlog_pos"), 7)
		src.Exec(t, "FLUSH BINARY LOGS")
		files := binlogFiles(t, src)
		// A file is purged once the binlog checkpoint has passed it (InnoDB flushed).
		waitFor(t, time.Minute, "PURGE BINARY LOGS to remove "+files[0], func() bool {
			src.Exec(t, "PURGE BINARY LOGS TO '"+files[len(files)-1]+"'")
			return binlogFiles(t, src)[0] == files[len(files)-1]
		})
		moreTransfers(t, load, 300*time.Millisecond)
		after := testdb.GTIDForDomain(src.QueryString(t, "SELECT @@gtid_binlog_pos"), 7)
		arch = archive()
		waitArchived(t, s3, src)
		list := s3.run(t, "list", "--repo", s3.url)
		if !strings.Contains(list.stdout, "GAP: gap after") || !strings.Contains(list.stdout, "purged") {
			t.Fatalf("list does not report the gap:\n%s", list.stdout)
		}
		// list --json carries what list shows: the archive, its gap, the windows.
		js := listAll(t, s3.env, s3.url)
		if js.Archive == nil || js.Archive.Files == 0 || len(js.Archive.Gaps) != 1 || !strings.Contains(js.Archive.Gaps[0].Reason, "purged") {
			t.Errorf("list --json's archive: %+v", js.Archive)
		}
		gapWindow := false
		for _, w := range js.Recoverable {
			gapWindow = gapWindow || w.EndsAtGap
		}
		if len(js.Recoverable) == 0 || !gapWindow || len(js.Backups) == 0 {
			t.Errorf("list --json's recoverable windows %+v (backups %d): want one ending at the gap", js.Recoverable, len(js.Backups))
		}
		ver := s3.run(t, "verify", "--repo", s3.url, "--binlogs")
		if !strings.Contains(ver.stdout, "GAP:") || !strings.Contains(ver.stdout, "1 recorded gaps") {
			t.Fatalf("verify does not list the gap:\n%s", ver.stdout)
		}
		datadir := filepath.Join(tmp, "past-gap")
		wantFail(t, s3.env, "gap", "restore", "--repo", s3.url, "--to-gtid", after, "--datadir", datadir)
		noDatadir(t, datadir)
		t.Logf("lost %s with the purged binlog; %s lies past the gap", lost, after)
	})
	t.Run("other server", func(t *testing.T) {
		// Another server behind the archiver's address: it stops with an error rather
		// than mix two histories in one archive.
		arch.Process.Signal(os.Interrupt)
		arch.Wait()
		files := binlogFiles(t, src)
		last := files[len(files)-1]
		fi, err := os.Stat(filepath.Join(src.Datadir, last))
		if err != nil {
			t.Fatal(err)
		}
		// It has a file of the same name, longer than what the archive holds of it.
		other := testdb.Start(t, testdb.Options{ServerID: 3})
		for f := binlogFiles(t, other); f[len(f)-1] != last; f = binlogFiles(t, other) {
			other.Exec(t, "FLUSH BINARY LOGS")
		}
		other.Exec(t, "CREATE TABLE test.blob (b LONGBLOB) ENGINE=InnoDB")
		other.Exec(t, "INSERT INTO test.blob VALUES (REPEAT('x', ?))", fi.Size()+1000)
		res := wantFail(t, s3.env, "different server", "binlog-archive", "--repo", s3.url, "--socket", other.Socket, "--user", "root")
		if strings.Contains(res.stderr, "binlog-archive: stored") {
			t.Errorf("the archiver did not tell the other server's event apart:\n%s", res.stderr)
		}
	})
	t.Run("expire", func(t *testing.T) {
		out := s3.run(t, "expire", "--repo", s3.url, "--keep-last", "1", "--dry-run")
		if !strings.Contains(out.stdout, "recoverable: from") {
			t.Fatalf("expire --dry-run shows no remaining window:\n%s", out.stdout)
		}
	})
}

// moreTransfers runs the bank alone for d.
func moreTransfers(t testing.TB, load *testdb.Workload, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := load.Bank.Run(ctx, 1); err != nil && ctx.Err() == nil {
		t.Fatalf("bank: %v", err)
	}
}

// binlogFiles lists the source's binlog files.
func binlogFiles(t testing.TB, src *testdb.Server) []string {
	t.Helper()
	rows, err := src.DB(t).Query("SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var files []string
	for rows.Next() {
		var name, size string
		if err := rows.Scan(&name, &size); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	return files
}

// archivedFiles reads what the archive holds of each binlog file (segments stored
// uncompressed, straight from the S3 server's directory). The archiver merges segments
// while it runs (--merge-every): a segment listed and then merged away before it is read
// makes it read the archive again.
func archivedFiles(t testing.TB, s3 *s3Repo) map[string][]byte {
	t.Helper()
	for try := 1; ; try++ {
		out, err := readArchive(s3)
		if err == nil {
			return out
		}
		if !errors.Is(err, fs.ErrNotExist) || try == 5 {
			t.Fatal(err)
		}
	}
}

// readArchive is one read of archivedFiles.
func readArchive(s3 *s3Repo) (map[string][]byte, error) {
	root := s3.srv.ObjectPath(s3.bucket, strings.TrimPrefix(s3.url, "s3://"+s3.bucket+"/")+"/binlogs")
	dirs, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("the archive's binlogs: %v", err) // not retried: the archive is not there
	}
	out := map[string][]byte{}
	for _, d := range dirs {
		segs, _ := os.ReadDir(filepath.Join(root, d.Name()))
		var names []string
		for _, s := range segs {
			names = append(names, s.Name())
		}
		// By start, the longer first: a merged segment and the small ones it covers may
		// both be there for a moment.
		sort.Slice(names, func(i, j int) bool {
			if names[i][:12] != names[j][:12] {
				return names[i] < names[j]
			}
			return names[i][13:25] > names[j][13:25]
		})
		var buf bytes.Buffer
		for _, n := range names {
			start, _ := strconv.ParseInt(n[:12], 10, 64)
			end, _ := strconv.ParseInt(n[13:25], 10, 64)
			if end <= int64(buf.Len()) {
				continue // covered by a merged segment
			}
			b, err := os.ReadFile(filepath.Join(root, d.Name(), n))
			if err != nil {
				return nil, err
			}
			if start != int64(buf.Len()) {
				return nil, fmt.Errorf("archive of %s: segment %s does not start where the one before ends (%d)", d.Name(), n, buf.Len())
			}
			buf.Write(b)
		}
		out[d.Name()] = buf.Bytes()
	}
	return out, nil
}

// waitArchived waits until the archive holds the source's current binlog file up to
// its current size.
func waitArchived(t testing.TB, s3 *s3Repo, src *testdb.Server) {
	t.Helper()
	files := binlogFiles(t, src)
	last := files[len(files)-1]
	want, err := os.ReadFile(filepath.Join(src.Datadir, last))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the archiver to store "+last, func() bool {
		return len(archivedFiles(t, s3)[last]) >= len(want)
	})
}

// checkSameBytes compares every archived file with the server's: the same bytes, the
// file the server is writing as far as it is archived.
func checkSameBytes(t testing.TB, s3 *s3Repo, src *testdb.Server) {
	t.Helper()
	got := archivedFiles(t, s3)
	if len(got) < 2 {
		t.Fatalf("the archive holds %d binlog files; the server restart alone made a new one", len(got))
	}
	for name, b := range got {
		disk, err := os.ReadFile(filepath.Join(src.Datadir, name))
		if err != nil {
			t.Fatalf("archived %s: %v", name, err)
		}
		// The server clears the in-use flag of a file's Format_description when it
		// closes the file: that one byte is compared apart.
		const inUse = 4 + 17
		if len(b) != len(disk) && !bytes.HasPrefix(disk, b[:inUse]) {
			t.Fatalf("archived %s: %d bytes, the server's has %d", name, len(b), len(disk))
		}
		n := min(len(b), len(disk))
		if !bytes.Equal(b[inUse+2:n], disk[inUse+2:n]) || !bytes.Equal(b[:inUse], disk[:inUse]) {
			t.Fatalf("archived %s differs from the server's file", name)
		}
		if len(b) != len(disk) {
			t.Fatalf("archived %s holds %d bytes, the server's %d", name, len(b), len(disk))
		}
	}
	t.Logf("%d archived binlog files equal the server's byte for byte", len(got))
}

// lastBankGTIDAt reads the server's binlog with mariadb-binlog and returns the last
// bank (domain 7) GTID before the first transaction stamped later than at.
func lastBankGTIDAt(t testing.TB, mbinlog string, src *testdb.Server, at time.Time) string {
	t.Helper()
	var paths []string
	for _, f := range binlogFiles(t, src) {
		paths = append(paths, filepath.Join(src.Datadir, f))
	}
	cmd := exec.Command(mbinlog, paths...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mariadb-binlog: %v", err)
	}
	re := regexp.MustCompile(`^#(\d{6} +\d+:\d\d:\d\d) server id \d+ +end_log_pos \d+ .*\tGTID (\d+-\d+-\d+)`)
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ts, err := time.ParseInLocation("060102 15:04:05", strings.Join(strings.Fields(m[1]), " "), time.UTC)
		if err != nil {
			t.Fatalf("mariadb-binlog time %q: %v", m[1], err)
		}
		if ts.After(at) {
			break
		}
		if strings.HasPrefix(m[2], "7-") {
			last = m[2]
		}
	}
	if last == "" {
		t.Fatalf("no bank transaction at or before %s in the server's binlog", at)
	}
	return last
}
