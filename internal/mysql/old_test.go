//go:build e2e

package mysql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestRefusesMySQL8015 runs a real MySQL 8.0.15, whose redo is in ib_logfile0/1 (the
// layout before 8.0.30, which ferry does not read), and checks that ferry refuses it in
// one line naming the version and 8.0.30, before copying anything: Probe, and the ferry
// binary itself (its backup.Detect reaches Probe; exit 1, that line alone on stderr, no
// target directory made). About 6 s on 2 cores: the server's initialization (3 s) with
// the build of ferry beside it, its start (1 s), the runs, its shutdown (1.6 s).
func TestRefusesMySQL8015(t *testing.T) {
	testdb.NeedMySQL8015(t)
	dir := t.TempDir()
	ferry := filepath.Join(dir, "ferry")
	var buildErr error
	built := make(chan struct{})
	go func() {
		defer close(built)
		out, err := exec.Command("go", "build", "-o", ferry, "github.com/ferry-backup/ferry/cmd/ferry").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ferry: %v\n%s", err, out)
		}
	}()
	t.Cleanup(func() { <-built }) // before dir is removed
	p := testdb.StartMySQL8015(t)
	ctx := context.Background()

	var version string
	if err := p.DB().QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil || !strings.HasPrefix(version, "8.0.15") {
		t.Fatalf("SELECT VERSION(): %q %v", version, err)
	}
	_, err := Probe(ctx, p.DB())
	if err == nil || !strings.Contains(err.Error(), "MySQL 8.0.15") || !strings.Contains(err.Error(), "8.0.30") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Probe on 8.0.15: %v; want one line naming MySQL 8.0.15 and 8.0.30", err)
	}
	refusal := err.Error()

	<-built
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	target := filepath.Join(dir, "backup")
	cmd := exec.Command(ferry, "backup", "--socket", p.Socket, "--user", "root", "--target-dir", target)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("ferry backup on 8.0.15: %v; want exit 1", err)
	}
	if want := "ferry: " + refusal + "\n"; stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("ferry backup on 8.0.15 printed\n%s%s\nwant on stderr only\n%s", stdout.String(), stderr.String(), want)
	}
	if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ferry backup on 8.0.15 left %s (%v): it must refuse before making anything", target, err)
	}
	t.Logf("%s", strings.TrimSpace(stderr.String()))
}
