//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/ferry-backup/ferry/internal/xbstream"
)

// TestHostileBackupsAreRefused plays an attacker who can write a backup directory, a
// stream or a repository: names that leave the target (../, absolute, symbolic links),
// server options that would run SQL or write files as root during prepare
// (init_file, general_log_file), and a size that lies. Each is refused with one line,
// or (server options) ignored with a warning; nothing is written outside the target.
func TestHostileBackupsAreRefused(t *testing.T) {
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	tmp := testdb.ShortDir(t)
	// What the attacker wants to touch outside every target.
	outside := filepath.Join(tmp, "outside")
	os.MkdirAll(outside, 0o750)
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("keep me"), 0o640)
	pwned := filepath.Join(outside, "pwned")
	genLog := filepath.Join(outside, "general.log")
	evilSQL := filepath.Join(outside, "evil.sql")
	os.WriteFile(evilSQL, []byte(fmt.Sprintf("SELECT 'pwned' INTO OUTFILE '%s';\n", pwned)), 0o644)
	evilSettings := map[string]string{"init_file": evilSQL, "general_log": "ON", "general_log_file": genLog}
	untouched := func(t *testing.T) {
		t.Helper()
		if b, _ := os.ReadFile(victim); string(b) != "keep me" {
			t.Errorf("a file outside the target was overwritten: %q", b)
		}
		for _, p := range []string{pwned, genLog} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("the prepare server wrote %s outside the target", p)
			}
		}
		ents, _ := os.ReadDir(outside)
		if len(ents) != 2 {
			t.Errorf("files appeared in %s: %v", outside, ents)
		}
	}

	dir := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, dir)...)
	plain := filepath.Join(tmp, "plain.xbs")
	backupToFile(t, src, plain, "--compress", "none")
	repoDir := filepath.Join(tmp, "repo")
	os.MkdirAll(repoDir, 0o750)
	id := strings.TrimSpace(mustFerry(t, "backup", "--socket", src.Socket, "--user", "root", "--repo", repoDir).stdout)

	t.Run("directory", func(t *testing.T) {
		for _, c := range []struct {
			name, want string
			tamper     func(dir string, m *manifest.Manifest)
		}{
			{"path with ..", "leaves the target directory", func(dir string, m *manifest.Manifest) {
				m.Files[0].Path = "../../outside/victim"
			}},
			{"absolute path", "is absolute", func(dir string, m *manifest.Manifest) { m.Files[0].Path = victim }},
			{"symbolic link", "symbolic link", func(dir string, m *manifest.Manifest) {
				f := innodbFile(t, m)
				p := filepath.Join(dir, f.Path)
				os.Remove(p)
				os.Symlink(victim, p)
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				bad := copyBackup(t, dir, filepath.Join(tmp, "bad-"+strings.ReplaceAll(c.name, " ", "-")))
				m := readManifest(t, bad)
				c.tamper(bad, m)
				writeManifest(t, bad, m)
				datadir := filepath.Join(tmp, "never", "dir-"+strings.ReplaceAll(c.name, " ", "-"))
				os.MkdirAll(filepath.Dir(datadir), 0o750)
				wantFail(t, nil, c.want, "restore", "--target-dir", bad, "--datadir", datadir)
				noDatadir(t, datadir)
				untouched(t)
			})
		}
		t.Run("server options", func(t *testing.T) {
			bad := copyBackup(t, dir, filepath.Join(tmp, "bad-options"))
			m := readManifest(t, bad)
			for k, v := range evilSettings {
				m.Server.Settings[k] = v
			}
			writeManifest(t, bad, m)
			datadir := filepath.Join(tmp, "restored-options")
			r := mustFerry(t, "restore", "--target-dir", bad, "--datadir", datadir)
			if !strings.Contains(r.stderr, "ignored") || !strings.Contains(r.stderr, "init_file") {
				t.Errorf("restore did not warn that init_file is ignored:\n%s", tail(r.stderr, 10))
			}
			untouched(t)
		})
	})

	t.Run("stream", func(t *testing.T) {
		good, err := os.ReadFile(plain)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ name, path, want string }{
			{"path with ..", "../outside/victim", "leaves the target directory"},
			{"absolute path", victim, "is absolute"},
		} {
			t.Run(c.name, func(t *testing.T) {
				f := filepath.Join(tmp, "bad.xbs")
				os.WriteFile(f, withExtraFile(t, good, c.path, []byte("overwritten")), 0o600)
				datadir := filepath.Join(tmp, "never", "stream-"+strings.ReplaceAll(c.name, " ", "-"))
				wantFail(t, nil, c.want, "restore", "--from", f, "--datadir", datadir)
				noDatadir(t, datadir)
				untouched(t)
			})
		}
		t.Run("server options in the manifest", func(t *testing.T) {
			f := filepath.Join(tmp, "options.xbs")
			os.WriteFile(f, withManifest(t, good, func(m *manifest.Manifest) {
				for k, v := range evilSettings {
					m.Server.Settings[k] = v
				}
			}), 0o600)
			r := mustFerry(t, "restore", "--from", f, "--datadir", filepath.Join(tmp, "restored-stream"))
			if !strings.Contains(r.stderr, "init_file") {
				t.Errorf("restore did not warn that init_file is ignored:\n%s", tail(r.stderr, 10))
			}
			untouched(t)
		})
		t.Run("invalid layout value", func(t *testing.T) {
			f := filepath.Join(tmp, "badvalue.xbs")
			os.WriteFile(f, withManifest(t, good, func(m *manifest.Manifest) {
				m.Server.Settings["innodb_data_file_path"] = "../../outside/victim:12M"
			}), 0o600)
			datadir := filepath.Join(tmp, "never", "stream-value")
			wantFail(t, nil, "tampered", "restore", "--from", f, "--datadir", datadir)
			noDatadir(t, datadir)
			untouched(t)
		})
	})

	t.Run("repository", func(t *testing.T) {
		mpath := filepath.Join(repoDir, "backups", id, "manifest.json")
		orig, err := os.ReadFile(mpath)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(mpath, orig, 0o640)
		for _, c := range []struct {
			name, want string
			tamper     func(m *manifest.Manifest)
		}{
			{"path with ..", "leaves the target directory", func(m *manifest.Manifest) { m.Files[0].Path = "../../outside/victim" }},
			{"object key with ..", "not a valid object", func(m *manifest.Manifest) { m.Objects[0].Key = "../../x" }},
			{"size that lies", "combine to", func(m *manifest.Manifest) {
				f := innodbFile(t, m)
				f.Size += 16384
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				var m manifest.Manifest
				json.Unmarshal(orig, &m)
				c.tamper(&m)
				b, _ := json.Marshal(&m)
				os.WriteFile(mpath, b, 0o640)
				wantFail(t, nil, c.want, "verify", "--repo", repoDir, id)
				datadir := filepath.Join(tmp, "never", "repo-"+strings.ReplaceAll(c.name, " ", "-"))
				wantFail(t, nil, c.want, "restore", "--repo", repoDir, id, "--datadir", datadir)
				noDatadir(t, datadir)
				untouched(t)
			})
		}
		os.WriteFile(mpath, orig, 0o640)
		t.Run("resume into a planted directory", func(t *testing.T) {
			datadir := filepath.Join(tmp, "resumed")
			staging := filepath.Join(tmp, ".resumed.ferry-restore-"+id)
			os.MkdirAll(staging, 0o750)
			wantFail(t, nil, "holds no ferry restore journal", "restore", "--repo", repoDir, id, "--datadir", datadir, "--resume")
			os.WriteFile(filepath.Join(staging, ".ferry-restore.journal"), []byte("ferry restore journal of backup "+id+"\n"), 0o640)
			os.Symlink(outside, filepath.Join(staging, "mysql"))
			wantFail(t, nil, "symbolic link", "restore", "--repo", repoDir, id, "--datadir", datadir, "--resume")
			untouched(t)
			os.RemoveAll(staging)
		})
	})
}

// TestFailedPrepareKeepsItsLog: a recovery that fails (here: a manifest claiming 4 KiB
// pages for a 16 KiB backup) names the server's error log, and the log is there.
func TestFailedPrepareKeepsItsLog(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE d")
	src.Exec(t, "CREATE TABLE d.t (id INT PRIMARY KEY) ENGINE=InnoDB")
	tmp := testdb.ShortDir(t)
	dir := filepath.Join(tmp, "full")
	mustFerry(t, backupArgs(src, dir)...)
	m := readManifest(t, dir)
	m.Server.Settings["innodb_page_size"] = "4k"
	writeManifest(t, dir, m)
	datadir := filepath.Join(tmp, "data")
	r := wantFail(t, nil, "full log: ", "restore", "--target-dir", dir, "--datadir", datadir)
	last := lastLine(r.stderr)
	logPath, _, _ := strings.Cut(last[strings.LastIndex(last, "full log: ")+len("full log: "):], ")")
	if b, err := os.ReadFile(logPath); err != nil || !bytes.Contains(b, []byte("[ERROR]")) {
		t.Fatalf("the error log the message names (%s) is not there with the errors: %v", logPath, err)
	}
	if filepath.Dir(logPath) != tmp {
		t.Errorf("error log %s is not beside the datadir", logPath)
	}
	noDatadir(t, datadir)
}

// innodbFile returns the manifest entry of a file-per-table tablespace.
func innodbFile(t testing.TB, m *manifest.Manifest) *manifest.File {
	t.Helper()
	for i := range m.Files {
		if strings.HasSuffix(m.Files[i].Path, ".ibd") && m.Files[i].Size > 0 {
			return &m.Files[i]
		}
	}
	t.Fatal("the backup has no .ibd file")
	return nil
}

// copyBackup copies a backup directory with cp -a.
func copyBackup(t testing.TB, from, to string) string {
	t.Helper()
	run(t, "", "cp", "-a", from, to)
	return to
}

// writeManifest replaces a backup directory's manifest.
func writeManifest(t testing.TB, dir string, m *manifest.Manifest) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifest.FileName), b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// withExtraFile rewrites a stream with one more file, at its start.
func withExtraFile(t testing.TB, s []byte, path string, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := xbstream.NewWriter(&out)
	w.WritePayload(path, 0, data)
	w.WriteEOF(path)
	out.Write(s)
	return out.Bytes()
}

// withManifest rewrites a ferry stream with its manifest changed by edit.
func withManifest(t testing.TB, s []byte, edit func(*manifest.Manifest)) []byte {
	t.Helper()
	r := xbstream.NewReader(bytes.NewReader(s))
	var out bytes.Buffer
	w := xbstream.NewWriter(&out)
	var mb []byte
	for {
		c, err := r.Next()
		if err != nil {
			break
		}
		switch {
		case c.Path == manifest.FileName && c.Type != xbstream.TypeEOF:
			mb = append(mb, c.Payload...)
		case c.Path == manifest.FileName:
			var m manifest.Manifest
			if err := json.Unmarshal(mb, &m); err != nil {
				t.Fatal(err)
			}
			edit(&m)
			b, _ := json.Marshal(&m)
			w.WritePayload(c.Path, 0, b)
			w.WriteEOF(c.Path)
		case c.Type == xbstream.TypeEOF:
			w.WriteEOF(c.Path)
		default:
			w.WritePayload(c.Path, c.Offset, c.Payload)
		}
	}
	return out.Bytes()
}
