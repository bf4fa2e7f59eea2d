package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/signing"
)

// run executes ferry with args (no server is reached: every case fails first) and
// returns its error.
func run(t *testing.T, args ...string) error {
	t.Helper()
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	return root.ExecuteContext(context.Background())
}

// TestExitCodeUsage: flag, argument, option-file and validation mistakes exit 2.
func TestExitCodeUsage(t *testing.T) {
	cnf := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(cnf, []byte("[ferry]\ncompres=zstd\n"), 0o600)
	for _, args := range [][]string{
		{"backup", "--bogus"},
		{"backup", "--parallel", "many"},
		{"nosuchverb"},
		{"backup", "--target-dir", "/x", "--stream"},
		{"backup", "--pace", "fast", "--target-dir", "/x"},
		{"restore", "--target-dir", "/x", "extra-argument"},
		{"backup", "--log-format", "yaml", "--target-dir", "/x"},
		{"backup", "--defaults-file", cnf, "--target-dir", "/x"},
		{"backup", "--repo", "/r1", "--repo", "/r2"}, // one repository: ferry copy for a second
		{"list", "--repo", "/r1", "--repo", "/r2"},
		{"copy", "--from", "/r1", "latest"},
		{"copy", "--from", "/r1", "--to", "/r2"},
		{"copy", "--from", "/r1", "--to", "/r2", "--all", "latest"},
		{"copy", "--from", "/r1", "--from", "/r3", "--to", "/r2", "latest"},
	} {
		err := run(t, args...)
		if got := exitCodeOf(err); got != exitUsage {
			t.Errorf("ferry %s: exit %d (%v), want %d", strings.Join(args, " "), got, err, exitUsage)
		}
	}
}

// TestOptionFileTypo: an option of [ferry] that no verb has is an error naming it; one
// that another verb has is left alone.
func TestOptionFileTypo(t *testing.T) {
	cnf := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(cnf, []byte("[ferry]\ncompres=zstd\n"), 0o600)
	err := run(t, "backup", "--defaults-file", cnf, "--target-dir", "/x")
	if err == nil || !strings.Contains(err.Error(), `unknown option "compres" in [ferry]`) {
		t.Errorf("a typo in [ferry]: %v", err)
	}
	os.WriteFile(cnf, []byte("[ferry]\ninto-server\nlog-level=warn\n"), 0o600) // restore's, everyone's
	cmd, _, _ := newRoot().Find([]string{"backup"})
	if err := cmd.ParseFlags([]string{"--defaults-file", cnf}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyOptionFile(context.Background(), cmd); err != nil {
		t.Errorf("an option of another verb in [ferry]: %v", err)
	}
}

// TestPasswordRefused: mariabackup's --password and -p, bare or with a value, are
// refused with one line pointing to the safe places, which never repeats the password.
func TestPasswordRefused(t *testing.T) {
	for _, args := range [][]string{
		{"backup", "--password=s3cret", "--target-dir", "/x"},
		{"backup", "--password", "s3cret", "--target-dir", "/x"},
		{"backup", "-ps3cret", "--target-dir", "/x"},
		{"backup", "--target-dir", "/x", "-p"},
		{"backup", "--target-dir", "/x", "--password"},
		{"clone", "--password=s3cret"},
	} {
		err := run(t, args...)
		switch {
		case err == nil:
			t.Errorf("ferry %s: accepted", strings.Join(args, " "))
		case strings.Contains(err.Error(), "s3cret"):
			t.Errorf("ferry %s: the error repeats the password: %v", strings.Join(args, " "), err)
		case !strings.Contains(err.Error(), "--password-file") || !strings.Contains(err.Error(), "MYSQL_PWD") || !strings.Contains(err.Error(), "[client]"):
			t.Errorf("ferry %s: %v", strings.Join(args, " "), err)
		case exitCodeOf(err) != exitUsage:
			t.Errorf("ferry %s: exit %d", strings.Join(args, " "), exitCodeOf(err))
		}
	}
	// --password-file without its argument is a mistake of its own, not a password.
	if err := run(t, "backup", "--target-dir", "/x", "--password-file"); err == nil || strings.Contains(err.Error(), "MYSQL_PWD") || exitCodeOf(err) != exitUsage {
		t.Errorf("ferry backup --password-file (no argument): %v", err)
	}
}

// TestStreamFormats: --stream=xbstream and --stream=mbstream mean --stream; another
// format is refused.
func TestStreamFormats(t *testing.T) {
	for arg, want := range map[string]string{"--stream": "true", "--stream=xbstream": "true", "--stream=mbstream": "true", "--stream=false": "false"} {
		cmd, _, _ := newRoot().Find([]string{"backup"})
		if err := cmd.ParseFlags([]string{arg}); err != nil {
			t.Errorf("%s: %v", arg, err)
			continue
		}
		if got := cmd.Flags().Lookup("stream").Value.String(); got != want {
			t.Errorf("%s: --stream is %s", arg, got)
		}
	}
	cmd, _, _ := newRoot().Find([]string{"backup"})
	if err := cmd.ParseFlags([]string{"--stream=tar"}); err == nil {
		t.Error("--stream=tar accepted")
	}
}

// TestExitCodeClasses: each class of failure maps to its code, however deeply wrapped.
func TestExitCodeClasses(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("restore: %w", err) }
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("disk on fire"), exitFailure},
		{wrap(mariadb.Unreachable(errors.New("server went away"))), exitConnect},
		{wrap(checksum.Mismatch(errors.New("backup file ibdata1 is corrupt"))), exitIntegrity},
		{wrap(fmt.Errorf("%w: object x", repo.ErrDamaged)), exitIntegrity},
		{wrap(fmt.Errorf("backup b: %w: unsigned", signing.ErrUntrusted)), exitIntegrity},
		{wrap(&innodb.CorruptPageError{PageNo: 3, Reason: "checksum"}), exitIntegrity},
		{withExitCode(errors.New("1 of 3 backups failed verification"), exitPartial), exitPartial},
		{wrap(usageErr("--repo is required")), exitUsage},
	} {
		if got := exitCodeOf(c.err); got != c.want {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.want)
		}
	}
	if m := checksum.Mismatch(errors.New("x is corrupt")); m.Error() != "x is corrupt" {
		t.Errorf("Mismatch changed the message: %q", m.Error())
	}
}

// TestJSONErrorLine: with --log-format json the last line is a JSON log record with the
// error and the exit code, and durations in the log are seconds under a _s key.
func TestJSONErrorLine(t *testing.T) {
	var b bytes.Buffer
	printError(&b, true, "backup file ibdata1 is corrupt", exitIntegrity)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("%q: %v", b.String(), err)
	}
	if rec["level"] != "ERROR" || rec["msg"] != "backup file ibdata1 is corrupt" || rec["exit_code"] != float64(exitIntegrity) {
		t.Errorf("error record %v", rec)
	}
	b.Reset()
	slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: secondsAttr})).Info("done", "took", 1500*time.Millisecond, "wait_s", 2*time.Second, "n", 3)
	rec = nil
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["took_s"] != 1.5 || rec["wait_s"] != 2.0 || rec["n"] != 3.0 || rec["took"] != nil {
		t.Errorf("durations: %v", rec)
	}
	if !jsonLog(newRoot(), []string{"backup", "--log-format", "json", "--bogus"}) || jsonLog(newRoot(), []string{"backup"}) {
		t.Error("jsonLog does not read an unparsed command line")
	}
}

// TestReplicaHintAddress: the replica hint of a restore names the backed-up server's
// host and port from its manifest, and placeholders for a backup that does not say.
func TestReplicaHintAddress(t *testing.T) {
	var b bytes.Buffer
	res := &restore.Result{Datadir: "/var/lib/mysql", Backup: &restore.Backup{Manifest: &manifest.Manifest{Server: manifest.Server{Host: "db1.example", Port: 3307}}},
		Coordinates: mariadb.Coordinates{BinlogFile: "binlog.000002", BinlogPos: 345, GTIDBinlogPos: "0-1-9"}}
	printReplication(&b, res)
	if !strings.Contains(b.String(), "MASTER_HOST='db1.example', MASTER_PORT=3307") {
		t.Errorf("the hint does not name the source:\n%s", b.String())
	}
	b.Reset()
	res.Backup = &restore.Backup{}
	printReplication(&b, res)
	if !strings.Contains(b.String(), "MASTER_HOST='<source host>', MASTER_PORT=3306") {
		t.Errorf("the hint of a backup without the address:\n%s", b.String())
	}
}

// TestVersionLine: ferry version prints the version, the commit and the Go version.
func TestVersionLine(t *testing.T) {
	var b bytes.Buffer
	root := newRoot()
	root.SetArgs([]string{"version"})
	root.SetOut(&b)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ferry " + version + " (commit ", runtime.Version()} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("ferry version printed %q, want %q in it", b.String(), want)
		}
	}
}

// TestMariadbdBySeries: mariadbd-SERIES= in [ferry] reaches --mariadbd of the verbs that
// run a server, after a mariadbd the files name, and is not a typo for the others.
func TestMariadbdBySeries(t *testing.T) {
	cnf := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(cnf, []byte("[ferry]\nmariadbd-11.4=/opt/mariadb-11.4\nmariadbd_10.11=/usr/sbin/mariadbd\n"), 0o600)
	for verb, want := range map[string]string{"restore": "10.11=/usr/sbin/mariadbd,11.4=/opt/mariadb-11.4", "clone": "10.11=/usr/sbin/mariadbd,11.4=/opt/mariadb-11.4", "backup": ""} {
		cmd, _, _ := newRoot().Find([]string{verb})
		if err := cmd.ParseFlags([]string{"--defaults-file", cnf}); err != nil {
			t.Fatal(err)
		}
		if _, err := applyOptionFile(context.Background(), cmd); err != nil {
			t.Errorf("ferry %s: %v", verb, err)
			continue
		}
		if f := cmd.Flags().Lookup("mariadbd"); f != nil && f.Value.String() != want {
			t.Errorf("ferry %s --mariadbd = %q, want %q", verb, f.Value.String(), want)
		}
	}
}

// TestNoBarWithJSON: with --log-format json no progress bar is drawn, even on a
// terminal: progress comes as JSON log lines like everything else.
func TestNoBarWithJSON(t *testing.T) {
	if (&globals{logFormat: "json"}).barOnStderr() {
		t.Error("a progress bar with --log-format json")
	}
}
