//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// secretMarker is stored in a table; an encrypted stream must not contain it.
const secretMarker = "FERRY-SECRET-MARKER-7f3a9c"

// streamArgs are the arguments of ferry backup --stream against s.
func streamArgs(s *testdb.Server, extra ...string) []string {
	return append([]string{"backup", "--socket", s.Socket, "--user", "root", "--stream"}, extra...)
}

// piped is the outcome of a backup piped into a restore.
type piped struct {
	backup, restore result
	stream          []byte // what went through the pipe (when kept)
}

// pipeline runs `ferry <backup> | ferry <restore>` through OS pipes, the test relaying
// the bytes (and keeping a copy when keep is set).
func pipeline(t testing.TB, backupArgs, restoreArgs []string, keep bool) piped {
	t.Helper()
	return slowPipeline(t, backupArgs, restoreArgs, keep, 0, 60*time.Second)
}

// slowPipeline is pipeline through a link of rate bytes per second (0: unlimited),
// given timeout to finish.
func slowPipeline(t testing.TB, backupArgs, restoreArgs []string, keep bool, rate int, timeout time.Duration) piped {
	t.Helper()
	var link func(io.Writer) io.Writer
	if rate > 0 {
		link = func(w io.Writer) io.Writer { return &slowWriter{w: w, rate: rate, start: time.Now()} }
	}
	return pipelineThrough(t, backupArgs, restoreArgs, keep, link, timeout)
}

// pipelineThrough is pipeline through the writer link makes of the restore's input
// (nil: none), given timeout to finish.
func pipelineThrough(t testing.TB, backupArgs, restoreArgs []string, keep bool, link func(io.Writer) io.Writer, timeout time.Duration) piped {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bk := exec.CommandContext(ctx, ferryBin, backupArgs...)
	rs := exec.CommandContext(ctx, ferryBin, restoreArgs...)
	// A hung run dumps its goroutines (SIGQUIT) instead of dying silently.
	bk.Cancel = func() error { return bk.Process.Signal(syscall.SIGQUIT) }
	rs.Cancel = func() error { return rs.Process.Signal(syscall.SIGQUIT) }
	var bkErr, rsOut, rsErr bytes.Buffer
	bk.Stderr, rs.Stdout, rs.Stderr = &bkErr, &rsOut, &rsErr
	out, err := bk.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := rs.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bk.Start(); err != nil {
		t.Fatal(err)
	}
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	var kept bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var w io.Writer = in
		if keep {
			w = io.MultiWriter(in, &kept)
		}
		if link != nil {
			w = link(w)
		}
		io.Copy(w, out)
		in.Close()
		out.Close() // a dead restore must give the backup EPIPE, not a full pipe
	}()
	wg.Wait()
	bkErrc := bk.Wait()
	rsErrc := rs.Wait()
	p := piped{backup: result{"", bkErr.String(), bkErrc}, restore: result{rsOut.String(), rsErr.String(), rsErrc}}
	p.stream = kept.Bytes()
	if ctx.Err() != nil {
		t.Logf("timed out; goroutines of the backup:\n%s\nof the restore:\n%s", p.backup.stderr, p.restore.stderr)
	}
	t.Logf("ferry %s | ferry %s: %v / %v\n%s\n%s", strings.Join(backupArgs, " "), strings.Join(restoreArgs, " "),
		p.backup.err, p.restore.err, tail(p.backup.stderr, 8), tail(p.restore.stderr, 12))
	return p
}

// TestStreamRoundTripUnderLoad pipes a hot backup into a restore for every encoding
// while a bank workload, non-InnoDB writers and a DDL loop run. Each restored copy must
// hold the bank invariants ending exactly at the stream's GTID, pass the DDL and
// non-InnoDB checks, and after replicating from that GTID match the source's checksums.
// An encrypted stream must not contain a marker stored in a table; a plain one does.
func TestStreamRoundTripUnderLoad(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{LogFileSize: "8M", ServerID: 1}, 3, 60000)
	db := src.DB(t)
	src.Exec(t, "CREATE DATABASE secret")
	src.Exec(t, "CREATE TABLE secret.t (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO secret.t SELECT seq, '"+secretMarker+"' FROM secret.seq_1_to_2000")

	load.Start()
	time.Sleep(time.Second)

	keyFile := filepath.Join(testdb.ShortDir(t), "key.txt")
	public := strings.TrimSpace(mustFerry(t, "keygen", "--output", keyFile).stdout)
	modes := []struct {
		name    string
		backup  []string
		restore []string
		marker  string // the stream must ("shows") or must not ("hides") contain the marker
	}{
		{"plain", []string{"--compress", "none"}, nil, "shows"},
		{"zstd", []string{"--compress", "zstd"}, nil, ""},
		{"lz4", []string{"--compress", "lz4"}, nil, ""},
		{"encrypted", []string{"--compress", "none", "--encrypt-to", public}, []string{"--identity-file", keyFile}, "hides"},
		{"zstd+encrypted", []string{"--encrypt-to", public}, []string{"--identity-file", keyFile}, "hides"},
	}
	tmp := testdb.ShortDir(t)
	restored := map[string]string{} // mode → datadir, checked once the load stopped
	gtids := map[string]string{}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			datadir := filepath.Join(tmp, "restored-"+strings.ReplaceAll(m.name, "+", "-"))
			p := pipeline(t, streamArgs(src, append(m.backup, "--max-rate", "20M")...),
				append([]string{"restore", "--from", "-", "--datadir", datadir}, m.restore...), true)
			if p.backup.err != nil || p.restore.err != nil {
				t.Fatalf("pipeline failed: backup %v, restore %v", p.backup.err, p.restore.err)
			}
			found := bytes.Contains(p.stream, []byte(secretMarker))
			if m.marker == "shows" && !found || m.marker == "hides" && found {
				t.Fatalf("marker stored in a table found in the %d-byte stream: %v (the stream %s it)", len(p.stream), found, m.marker)
			}
			restored[m.name], gtids[m.name] = datadir, restoredGTID(t, p.restore.stdout)
		})
	}
	load.Stop(t)
	want := testdb.Checksums(t, db)
	for _, m := range modes {
		t.Run(m.name+"/check", func(t *testing.T) {
			datadir, gtid := restored[m.name], gtids[m.name]
			if datadir == "" {
				t.Fatal("no restored copy to check: the round trip above failed")
			}
			checkReplica(t, src, load, datadir, gtid, want)
		})
	}
}

// restoredGTID reads the GTID position restore printed.
func restoredGTID(t testing.TB, stdout string) string {
	t.Helper()
	const key = "gtid_slave_pos = '"
	i := strings.Index(stdout, key)
	if i < 0 {
		t.Fatalf("restore printed no GTID:\n%s", stdout)
	}
	rest := stdout[i+len(key):]
	return rest[:strings.IndexByte(rest, '\'')]
}

// noDatadir checks a failed restore left neither the datadir nor a staging dir.
func noDatadir(t testing.TB, datadir string) {
	t.Helper()
	if _, err := os.Stat(datadir); err == nil {
		t.Errorf("failed restore left %s", datadir)
	}
	ents, _ := os.ReadDir(filepath.Dir(datadir))
	for _, e := range ents {
		if strings.Contains(e.Name(), "staging") {
			t.Errorf("failed restore left %s", e.Name())
		}
	}
}

// slowWriter passes bytes on at about rate bytes per second, as a slow link does.
type slowWriter struct {
	w     io.Writer
	rate  int
	start time.Time
	n     int64
}

func (s *slowWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	if ahead := time.Duration(float64(s.n)/float64(s.rate)*float64(time.Second)) - time.Since(s.start); ahead > 0 {
		time.Sleep(ahead)
	}
	return n, err
}
