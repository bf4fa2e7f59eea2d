package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
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
		"verify":         {"repo": "s3://backups/db1", "identity-file": "/etc/ferry/identity.txt", "restore": "false"},
	} {
		root := newRoot()
		cmd, _, err := root.Find([]string{verb})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--defaults-file", cnf}); err != nil {
			t.Fatal(err)
		}
		if _, err := applyOptionFile(context.Background(), cmd); err != nil {
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
// [ferry-VERB] over [ferry], for a flag given at most once (--repo) too.
func TestOptionFileFlagsWin(t *testing.T) {
	cnf := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(cnf, []byte("[ferry]\nparallel=3\nchunk-size=512K\nmax-rate=1M\nrepo=/r1\n[ferry-backup]\nparallel=1\nmax-rate=2M\nrepo=/r2\n"), 0o600)
	cmd, _, _ := newRoot().Find([]string{"backup"})
	if err := cmd.ParseFlags([]string{"--defaults-file", cnf, "--max-rate", "3M"}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyOptionFile(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"parallel": "1", "chunk-size": "512K", "max-rate": "3M", "repo": "/r2"} {
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
	bin := testdb.Tool(t, "systemd-analyze", "systemd")
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
	if len(paths) != 5 {
		t.Fatalf("want the backup and drill services and timers and the archiver service in docs/systemd, found %v", paths)
	}
	out, err := exec.Command(bin, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestOptionFileExclusiveGroups: a flag on the command line keeps an option file's
// other flag of its exclusive group from being set (restore --target-dir with repo= in
// [ferry] restores the directory), and [ferry-VERB] wins over [ferry] within a group.
func TestOptionFileExclusiveGroups(t *testing.T) {
	for _, c := range []struct {
		name, verb, cnf string
		args            []string
		want            map[string]string
		skipped         string
	}{
		{"restore target-dir over [ferry] repo", "restore", "[ferry]\nrepo=/r\nlog-format=json\n", []string{"--target-dir", "/b"},
			map[string]string{"target-dir": "/b", "repo": "", "log-format": "json"}, "option repo in [ferry] of the option files not applied: --target-dir"},
		{"restore repo over [ferry-restore] from", "restore", "[ferry-restore]\nfrom=/f.xbs\nto-time=2026-01-01 00:00:00\n", []string{"--repo", "/r", "--to-gtid", "0-1-2"},
			map[string]string{"repo": "/r", "from": "[]", "to-time": "", "to-gtid": "0-1-2"}, "option from in [ferry-restore]"},
		{"restore into-server over datadir", "restore", "[ferry-restore]\ndatadir=/var/lib/mysql-new\n", []string{"--tables", "a.b", "--into-server"},
			map[string]string{"datadir": ""}, "option datadir"},
		{"backup [ferry-backup] target-dir over [ferry] repo", "backup", "[ferry]\nrepo=/r\n[ferry-backup]\ntarget-dir=/t\n", nil,
			map[string]string{"target-dir": "/t", "repo": ""}, "--target-dir is given"},
		{"backup max-impact over max-rate", "backup", "[ferry]\nmax-rate=1M\nparallel=2\n", []string{"--max-impact", "10"},
			map[string]string{"max-rate": "0", "parallel": "2"}, "option max_rate"},
		{"restore target-dir over a repository's companions", "restore", "[ferry-restore]\nrepo=s3://b/p\nidentity-file=/k.txt\nresume\nparallel=3\n", []string{"--target-dir", "/b", "--move"},
			map[string]string{"repo": "", "identity-file": "", "resume": "false", "move": "true", "parallel": "3"}, "option identity_file in [ferry-restore] of the option files not applied: --target-dir is given"},
		{"restore from keeps identity-file", "restore", "[ferry-restore]\nrepo=s3://b/p\nidentity-file=/k.txt\n", []string{"--from", "x.xbs"},
			map[string]string{"repo": "", "identity-file": "/k.txt"}, "option repo"},
		{"backup target-dir over a repository's compression and keys", "backup", "[ferry-backup]\nrepo=s3://b/p\ncompress=zstd\nencrypt-to=age1x\nincremental\nslave-info\n", []string{"--target-dir", "/t"},
			map[string]string{"repo": "", "compress": "", "encrypt-to": "[]", "incremental": "false", "slave-info": "true"}, "option encrypt_to"},
		{"backup stream keeps compression", "backup", "[ferry]\nrepo=s3://b/p\ncompress=lz4\n", []string{"--stream"},
			map[string]string{"repo": "", "compress": "lz4"}, "option repo"},
		{"the same flag: the command line wins", "backup", "[ferry]\nrepo=/a\n", []string{"--repo", "/b"},
			map[string]string{"repo": "/b"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cnf := filepath.Join(t.TempDir(), "my.cnf")
			if err := os.WriteFile(cnf, []byte(c.cnf), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd, _, err := newRoot().Find([]string{c.verb})
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.ParseFlags(append([]string{"--defaults-file", cnf}, c.args...)); err != nil {
				t.Fatal(err)
			}
			skipped, err := applyOptionFile(context.Background(), cmd)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range c.want {
				if got := cmd.Flags().Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
			all := strings.Join(skipped, "\n")
			if c.skipped == "" && all != "" || !strings.Contains(all, c.skipped) {
				t.Errorf("skipped %q, want a line with %q", all, c.skipped)
			}
		})
	}
}

// TestExclusiveGroupsNameFlags: every flag of exclusiveGroups is a flag of its verb.
func TestExclusiveGroupsNameFlags(t *testing.T) {
	for _, verb := range []string{"backup", "restore"} {
		cmd, _, _ := newRoot().Find([]string{verb})
		for _, g := range exclusiveGroups(verb) {
			for _, c := range g {
				for _, name := range append([]string{c.flag}, c.with...) {
					if cmd.Flags().Lookup(name) == nil {
						t.Errorf("ferry %s has no --%s", verb, name)
					}
				}
			}
		}
	}
}
