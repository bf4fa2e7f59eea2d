package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestInstalledPackage: the .deb that .ci/run builds (scripts/package.sh) and installs
// with apt holds /usr/bin/ferry of this version, a man page for ferry and for every verb,
// the bash and zsh completions, systemd units that systemd-analyze accepts against the
// installed binary, and an /etc/ferry/ferry.cnf whose every option is commented out.
// It runs where the package is installed (FERRY_PACKAGE_INSTALLED=1: .ci/run sets it).
func TestInstalledPackage(t *testing.T) {
	if os.Getenv("FERRY_PACKAGE_INSTALLED") == "" {
		testdb.Missing(t, "the package is not installed (FERRY_PACKAGE_INSTALLED unset)", ".ci/run builds and installs it: scripts/package.sh, apt-get install ./dist/ferry_*.deb")
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "ferry").CombinedOutput(); err != nil || !strings.Contains(string(out), "install ok installed") {
		t.Fatalf("dpkg does not list ferry as installed: %v %s", err, out)
	}
	out, err := exec.Command("/usr/bin/ferry", "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ferry "+version+" (commit ") {
		t.Errorf("/usr/bin/ferry version: %v %q", err, out)
	}
	pages := []string{"ferry"}
	for _, c := range newRoot().Commands() {
		if !c.Hidden && c.Name() != "help" {
			pages = append(pages, "ferry-"+c.Name())
		}
	}
	for _, p := range pages {
		if out, err := exec.Command("man", "-w", p).CombinedOutput(); err != nil {
			t.Errorf("man -w %s: %v %s", p, err, out)
		}
	}
	for _, f := range []string{"/usr/share/bash-completion/completions/ferry", "/usr/share/zsh/vendor-completions/_ferry"} {
		if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), "ferry") {
			t.Errorf("completion %s: %v", f, err)
		}
	}
	units, _ := filepath.Glob("/usr/lib/systemd/system/ferry-*")
	if len(units) != 5 {
		t.Fatalf("installed units %v, want the backup and drill services and timers and the archiver service", units)
	}
	if out, err := exec.Command("systemd-analyze", append([]string{"verify", "--man=no"}, units...)...).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %v: %v\n%s", units, err, out)
	}
	for _, u := range units {
		if b, _ := os.ReadFile(u); strings.Contains(string(b), "/usr/local/bin/ferry") {
			t.Errorf("%s runs /usr/local/bin/ferry, not the packaged /usr/bin/ferry", u)
		}
	}
	cnf, err := os.ReadFile("/etc/ferry/ferry.cnf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(cnf), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			t.Errorf("/etc/ferry/ferry.cnf sets %q: the installed sample must change nothing", l)
		}
	}
	if !strings.Contains(string(cnf), "# [ferry-backup]") {
		t.Error("/etc/ferry/ferry.cnf lacks the commented example")
	}
}
