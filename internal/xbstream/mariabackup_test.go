//go:build e2e

package xbstream

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestMariabackupStream unpacks a real `mariadb-backup --stream=xbstream` with Extract
// and with the stock `mbstream -x`; both trees must be identical.
func TestMariabackupStream(t *testing.T) {
	mb := lookMbstream(t)
	s := testdb.Start(t, testdb.Options{ServerID: 1})
	s.Exec(t, "CREATE DATABASE d")
	s.Exec(t, "CREATE TABLE d.t (id INT PRIMARY KEY, v TEXT) ENGINE=InnoDB")
	s.Exec(t, "INSERT INTO d.t SELECT seq, REPEAT('v', 300) FROM d.seq_1_to_20000")
	tmp := t.TempDir()
	cmd := exec.Command("mariadb-backup", "--backup", "--stream=xbstream", "--socket="+s.Socket, "--user=root", "--target-dir="+filepath.Join(tmp, "tmp"))
	stream, err := cmd.Output()
	if err != nil {
		t.Fatalf("mariadb-backup --stream: %v", err)
	}
	ours, theirs := filepath.Join(tmp, "ours"), filepath.Join(tmp, "theirs")
	if _, err := Extract(bytes.NewReader(stream), ours); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(theirs, 0o755)
	x := exec.Command(mb, "-x", "-C", theirs)
	x.Stdin = bytes.NewReader(stream)
	if out, err := x.CombinedOutput(); err != nil {
		t.Fatalf("mbstream -x: %v\n%s", err, out)
	}
	n := 0
	filepath.WalkDir(theirs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(theirs, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(ours, rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from mbstream's (err %v)", rel, err)
		}
		n++
		return nil
	})
	if n < 10 || !fileExists(filepath.Join(ours, "d", "t.ibd")) || !fileExists(filepath.Join(ours, "xtrabackup_checkpoints")) {
		t.Fatalf("only %d files in the stream", n)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
