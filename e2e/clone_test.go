//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// donor is a source server with ferry serve attached.
type donor struct {
	src   *testdb.Server
	load  *testdb.Workload
	addr  string
	token string
	serve *exec.Cmd
}

// startDonor starts a loaded source server and ferry serve on it (with extra flags).
func startDonor(t *testing.T, fillerRows int, extra ...string) *donor {
	t.Helper()
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 4, fillerRows)
	dir := testdb.ShortDir(t)
	d := &donor{src: src, load: load, token: filepath.Join(dir, "token")}
	if err := os.WriteFile(d.token, []byte("correct horse battery staple 7f3a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.addr = "127.0.0.1:" + strconv.Itoa(testdb.FreePort(t))
	args := append([]string{"serve", "--listen", d.addr, "--token-file", d.token, "--socket", src.Socket, "--user", "root"}, extra...)
	d.serve = startFerry(t, nil, args...)
	waitFor(t, 30*time.Second, "ferry serve listening", func() bool {
		c, err := exec.Command("bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(d.addr, ":", "/", 1)).CombinedOutput()
		_ = c
		return err == nil
	})
	return d
}

// writeFile writes a small secret file.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var gtidRe = regexp.MustCompile(`GTID position: (\S*)`)

// clonedGTID is the position ferry clone printed.
func clonedGTID(t testing.TB, out string) string {
	t.Helper()
	m := gtidRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ferry clone printed no GTID position:\n%s", out)
	}
	return m[1]
}

// TestCloneStartReplicateUnderLoad: with the bank, non-InnoDB and DDL workloads
// running on the donor, one ferry clone --start --replicate leaves a running replica;
// once the load stops it catches up, every table's checksum equals the donor's, and
// the bank's invariants hold on it up to the donor's last transfer (a wrong start
// GTID would stop replication on a duplicate or leave a gap in the ledger). The redo
// log, parsed as its frames landed, is applied natively.
func TestCloneStartReplicateUnderLoad(t *testing.T) {
	d := startDonor(t, 60000, "--once")
	dir := testdb.ShortDir(t)
	pw := writeFile(t, dir, "repl.pw", "replpw\n")
	rcpt := testdb.Configure(t, testdb.Options{ServerID: 2})
	d.load.Start()
	time.Sleep(time.Second)
	res := mustFerry(t, "clone", "--from", d.addr, "--token-file", d.token, "--datadir", rcpt.Datadir,
		"--defaults-file", rcpt.ConfigFile, "--streams", "3", "--max-rate", "20M", "--start", "--replicate",
		"--repl-user", "repl", "--repl-password-file", pw)
	rcpt.Adopt(t)
	out := res.stdout
	// The log arrived over three streams and was parsed as it landed.
	if !strings.Contains(res.stderr, "redo applied natively") || !strings.Contains(res.stderr, "parsed_ahead=true") {
		t.Errorf("the clone's redo was not applied natively from the parse that followed its frames:\n%s", tail(res.stderr, 20))
	}
	gtid := clonedGTID(t, out)
	if !strings.Contains(out, "Replicating from 127.0.0.1:"+strconv.Itoa(d.src.Port)) {
		t.Fatalf("clone did not report replication:\n%s", out)
	}
	time.Sleep(2 * time.Second) // the replica applies under load
	d.load.Stop(t)
	testdb.WaitCaughtUp(t, rcpt, d.src, 2*time.Minute)
	want := testdb.Checksums(t, d.src.DB(t))
	compareChecksums(t, want, testdb.Checksums(t, rcpt.DB(t)))
	final := d.src.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos")
	d.load.Check(t, rcpt.DB(t), final)
	if err := d.serve.Wait(); err != nil {
		t.Fatalf("ferry serve --once exited with %v after a good clone", err)
	}
	t.Logf("cloned at %s, caught up to %s", gtid, final)
}
