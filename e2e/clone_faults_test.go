//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestCloneSurvivesDroppedConnections: every connection of a clone is cut twice
// mid-copy; the recipient reconnects, the donor resends what was not acknowledged, and
// the copy holds the workload's invariants at its GTID and replicates to equal
// checksums.
func TestCloneSurvivesDroppedConnections(t *testing.T) {
	d := startDonor(t, 60000)
	proxy := testdb.StartTCPProxy(t, d.addr)
	datadir := filepath.Join(testdb.ShortDir(t), "data")
	d.load.Start()
	logf := filepath.Join(testdb.ShortDir(t), "clone.log")
	cmd := exec.Command(ferryBin, "clone", "--from", proxy.Addr, "--token-file", d.token, "--datadir", datadir,
		"--streams", "3", "--max-rate", "12M", "--compress", "none")
	out, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{25 << 20, 60 << 20} {
		waitFor(t, 2*time.Minute, "clone traffic", func() bool {
			if cmd.ProcessState != nil || syscall.Kill(cmd.Process.Pid, 0) != nil {
				b, _ := os.ReadFile(logf)
				t.Fatalf("clone ended early:\n%s", tail(string(b), 20))
			}
			return proxy.Bytes() > at
		})
		proxy.Cut()
	}
	err = cmd.Wait()
	out.Close()
	log, _ := os.ReadFile(logf)
	if err != nil {
		t.Fatalf("clone through cut connections failed: %v\n%s", err, tail(string(log), 20))
	}
	if proxy.Cuts() < 4 || !strings.Contains(string(log), "reconnecting") {
		t.Fatalf("the connections were not cut as planned (%d cut):\n%s", proxy.Cuts(), tail(string(log), 20))
	}
	d.load.Stop(t)
	want := testdb.Checksums(t, d.src.DB(t))
	checkReplica(t, d.src, d.load, datadir, clonedGTID(t, stdout.String()), want)
}

// TestCloneRecipientKilledThenRetried: a clone over an existing datadir is SIGKILLed
// mid-copy; the datadir is untouched. Run again, the clone clears the leftover staging
// directory, starts over and succeeds; the old datadir is kept beside the new one.
func TestCloneRecipientKilledThenRetried(t *testing.T) {
	t.Parallel()
	d := startDonor(t, 60000)
	rcpt := testdb.Configure(t, testdb.Options{ServerID: 2})
	if err := os.MkdirAll(rcpt.Datadir, 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, rcpt.Datadir, "keep.me", "the old datadir")
	args := []string{"clone", "--from", d.addr, "--token-file", d.token, "--datadir", rcpt.Datadir, "--replace",
		"--defaults-file", rcpt.ConfigFile}
	first := startFerry(t, nil, append(args, "--max-rate", "8M")...)
	staging := filepath.Join(filepath.Dir(rcpt.Datadir), ".data.ferry-clone")
	waitFor(t, time.Minute, "the first clone to write", func() bool {
		n, _ := dirSize(staging)
		return n > 20<<20
	})
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	if ents, _ := os.ReadDir(rcpt.Datadir); len(ents) != 1 || ents[0].Name() != "keep.me" {
		t.Fatalf("the killed clone touched the datadir: %v", ents)
	}
	res := mustFerry(t, append(args, "--start")...)
	rcpt.Adopt(t)
	if !strings.Contains(res.stderr, "interrupted clone") {
		t.Fatalf("the retry did not say it cleared the interrupted clone:\n%s", tail(res.stderr, 20))
	}
	old, _ := filepath.Glob(rcpt.Datadir + ".ferry-old-*")
	if len(old) != 1 {
		t.Fatalf("old datadir not kept aside: %v", old)
	}
	if b, err := os.ReadFile(filepath.Join(old[0], "keep.me")); err != nil || string(b) != "the old datadir" {
		t.Fatalf("old datadir damaged: %v %q", err, b)
	}
	compareChecksums(t, testdb.Checksums(t, d.src.DB(t)), testdb.Checksums(t, rcpt.DB(t)))
}

// dirSize sums the sizes of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// TestCloneErrors: each mistake fails within the test's deadline with one line that
// says what to do, and leaves the datadir as it was.
func TestCloneErrors(t *testing.T) {
	t.Parallel()
	d := startDonor(t, 1000)
	dir := testdb.ShortDir(t)
	wrong := writeFile(t, dir, "wrong", "not the donor token at all")
	short := writeFile(t, dir, "short", "guessable")
	open := writeFile(t, dir, "open", "correct horse battery staple 7f3a")
	os.Chmod(open, 0o644)
	old := filepath.Join(dir, "old")
	os.MkdirAll(old, 0o750)
	writeFile(t, old, "keep.me", "x")
	fresh := filepath.Join(dir, "fresh")
	fakeBin := writeFile(t, dir, "mariadbd-10.6", "#!/bin/sh\necho 'mariadbd  Ver 10.6.21-MariaDB for debian-linux-gnu on x86_64'\n")
	os.Chmod(fakeBin, 0o755)
	caKey, caCert := filepath.Join(dir, "ca.key"), filepath.Join(dir, "ca.pem")
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		"-keyout", caKey, "-out", caCert, "-subj", "/CN=other CA", "-days", "1").CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	badCnf := writeFile(t, dir, "bad.cnf", "[mariadbd]\nuser=root\nsocket="+filepath.Join(dir, "s.sock")+"\nno-such-option=1\n")
	base := []string{"clone", "--from", d.addr}
	cases := []struct {
		name, want string
		args       []string
	}{
		{"wrong token", "wrong token", append(base, "--token-file", wrong, "--datadir", fresh)},
		{"no credentials", "needs --token-file", append(base, "--datadir", fresh)},
		{"short token", "at least 16", append(base, "--token-file", short, "--datadir", fresh)},
		{"token readable by others", "chmod 600", append(base, "--token-file", open, "--datadir", fresh)},
		{"serve with a short token", "at least 16", []string{"serve", "--listen", "127.0.0.1:0", "--socket", d.src.Socket, "--token-file", short}},
		{"other CA", "signed by --tls-ca", append(base, "--tls-ca", caCert, "--tls-server-name", "donor.example", "--datadir", fresh)},
		{"other series", "install mariadb-server 10.11", append(base, "--token-file", d.token, "--datadir", fresh, "--mariadbd", fakeBin)},
		{"datadir not empty", "is not empty", append(base, "--token-file", d.token, "--datadir", old)},
		{"serve without credentials", "needs --token-file", []string{"serve", "--listen", "127.0.0.1:0", "--socket", d.src.Socket}},
		{"no donor", "is ferry serve running there", []string{"clone", "--from", "127.0.0.1:1", "--token-file", d.token, "--datadir", fresh}},
		{"start fails", "previous datadir is back in place", append(base, "--token-file", d.token, "--datadir", old, "--replace",
			"--start", "--defaults-file", badCnf)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantFail(t, nil, c.want, c.args...)
			if _, err := os.Stat(fresh); err == nil {
				t.Fatalf("%s left %s behind", c.name, fresh)
			}
			if ents, _ := os.ReadDir(old); len(ents) != 1 || ents[0].Name() != "keep.me" {
				t.Fatalf("%s: the existing datadir changed: %v", c.name, ents)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*ferry-clone*"))
			for _, l := range left {
				if !strings.HasSuffix(l, ".lock") {
					t.Fatalf("%s left %s behind", c.name, l)
				}
			}
		})
	}
	failed, _ := filepath.Glob(old + ".ferry-failed-*")
	if len(failed) != 1 {
		t.Fatalf("the clone that did not start is not kept for diagnosis: %v", failed)
	}
	t.Run("disk too small", func(t *testing.T) {
		mnt := filepath.Join(dir, "small")
		os.MkdirAll(mnt, 0o755)
		mountTmpfs(t, mnt, "8m")
		wantFail(t, nil, "not enough free disk", "clone", "--from", d.addr, "--token-file", d.token, "--datadir", filepath.Join(mnt, "data"))
	})
}
