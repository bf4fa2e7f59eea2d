package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSampleOptionFile: docs/systemd/ferry.cnf is accepted by the verbs its units run,
// and gives them the options it names.
func TestSampleOptionFile(t *testing.T) {
	cnf := filepath.Join("..", "..", "docs", "systemd", "ferry.cnf")
	for verb, want := range map[string]map[string]string{
		"backup":         {"repo": "s3://backups/db1", "slave-info": "true", "user": "ferry-backup", "log-format": "json"},
		"expire":         {"repo": "s3://backups/db1"},
		"binlog-archive": {"repo": "s3://backups/db1", "metrics-listen": "127.0.0.1:9104", "user": "repl"},
		"restore":        {"log-format": "json", "repo": ""},
	} {
		root := newRoot()
		cmd, _, err := root.Find([]string{verb})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--defaults-file", cnf}); err != nil {
			t.Fatal(err)
		}
		if err := applyOptionFile(context.Background(), cmd); err != nil {
			t.Fatalf("ferry %s refuses the sample option file: %v", verb, err)
		}
		for name, v := range want {
			if got := cmd.Flags().Lookup(name).Value.String(); got != v {
				t.Errorf("ferry %s --%s = %q, want %q", verb, name, got, v)
			}
		}
	}
}

// TestOptionFileFlagsWin: a flag on the command line wins over both groups, and
// [ferry-VERB] over [ferry].
func TestOptionFileFlagsWin(t *testing.T) {
	cnf := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(cnf, []byte("[ferry]\nparallel=3\nchunk-size=512K\nmax-rate=1M\n[ferry-backup]\nparallel=1\nmax-rate=2M\n"), 0o600)
	cmd, _, _ := newRoot().Find([]string{"backup"})
	if err := cmd.ParseFlags([]string{"--defaults-file", cnf, "--max-rate", "3M"}); err != nil {
		t.Fatal(err)
	}
	if err := applyOptionFile(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"parallel": "1", "chunk-size": "512K", "max-rate": "3M"} {
		if got := cmd.Flags().Lookup(name).Value.String(); !strings.EqualFold(got, want) && got != sizeOf(t, want) {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
}

func sizeOf(t *testing.T, s string) string {
	var n int64
	if err := (byteSize{&n}).Set(s); err != nil {
		t.Fatal(err)
	}
	return byteSize{&n}.String()
}

// TestSystemdUnits: the units in docs/systemd pass systemd-analyze verify (with
// ExecStart pointing at an executable that exists here).
func TestSystemdUnits(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found: CI installs systemd to check docs/systemd")
		}
		t.Skip("systemd-analyze not found")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	units, _ := filepath.Glob(filepath.Join("..", "..", "docs", "systemd", "*.service"))
	timers, _ := filepath.Glob(filepath.Join("..", "..", "docs", "systemd", "*.timer"))
	var paths []string
	for _, u := range append(units, timers...) {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(u))
		os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/ferry", self)), 0o644)
		paths = append(paths, p)
	}
	if len(paths) != 3 {
		t.Fatalf("want the backup service and timer and the archiver service in docs/systemd, found %v", paths)
	}
	out, err := exec.Command(bin, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
