//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// s3Repo is a bucket on a real S3 server (versitygw) reached through a fault proxy,
// with the environment ferry needs to use it.
type s3Repo struct {
	srv    *testdb.S3Server
	proxy  *testdb.FaultProxy
	bucket string
	url    string // s3://bucket/prefix
	env    []string
}

// newS3Repo starts an S3 server and a fault proxy in front of it; ferry is pointed at
// the proxy.
func newS3Repo(t testing.TB, bucket, prefix string) *s3Repo {
	t.Helper()
	srv := testdb.StartS3(t)
	srv.MakeBucket(t, bucket)
	proxy := testdb.StartFaultProxy(t, srv.Endpoint)
	env := append(srv.Env(), "AWS_ENDPOINT_URL="+proxy.URL)
	return &s3Repo{srv: srv, proxy: proxy, bucket: bucket, url: "s3://" + bucket + "/" + prefix, env: env}
}

// run runs ferry with the repository's environment and fails the test on error.
func (r *s3Repo) run(t testing.TB, args ...string) result {
	t.Helper()
	res := ferry(t, r.env, args...)
	if res.err != nil {
		t.Fatalf("ferry %s failed: %v\n%s", strings.Join(args, " "), res.err, res.stderr)
	}
	return res
}

// listedBackup is one entry of ferry list --json.
type listedBackup struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Restorable bool   `json:"restorable"`
	GTID       string `json:"gtid"`
	StoredSize int64  `json:"stored_size"`
	Size       int64  `json:"size"`
	Objects    int    `json:"objects"`
}

// listedRepo is what ferry list --json prints.
type listedRepo struct {
	Backups []listedBackup `json:"backups"`
	Archive *struct {
		Files    int    `json:"files"`
		End      string `json:"end"`
		LastGTID string `json:"last_gtid"`
		Gaps     []struct {
			Reason string `json:"reason"`
		} `json:"gaps"`
	} `json:"binlog_archive"`
	Recoverable []struct {
		FromBackup string `json:"from_backup"`
		ToGTID     string `json:"to_gtid"`
		EndsAtGap  bool   `json:"ends_at_gap"`
	} `json:"recoverable"`
}

func listRepo(t testing.TB, env []string, url string, extra ...string) []listedBackup {
	t.Helper()
	return listAll(t, env, url, extra...).Backups
}

// listAll is the whole of ferry list --json: backups, binlog archive, recoverable windows.
func listAll(t testing.TB, env []string, url string, extra ...string) listedRepo {
	t.Helper()
	res := ferry(t, env, append([]string{"list", "--repo", url, "--json"}, extra...)...)
	if res.err != nil {
		t.Fatalf("ferry list: %v\n%s", res.err, res.stderr)
	}
	var out listedRepo
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("ferry list --json: %v\n%s", err, res.stdout)
	}
	return out
}

// repoBackupArgs are the arguments of a backup of s into a repository.
func repoBackupArgs(s *testdb.Server, url string, extra ...string) []string {
	return append([]string{"backup", "--socket", s.Socket, "--user", "root", "--repo", url}, extra...)
}

// TestRepoCycleUnderLoad: a hot backup to S3 (encrypted, compressed, small parts so
// that there are many parts and packs) while the bank, non-InnoDB and DDL workloads
// run; list shows it complete with its GTID; verify re-reads every object and page;
// restore brings back a copy that holds the invariants exactly at that GTID and, once
// replicating from it, matches the source's checksums. The same backup into a local
// directory repository restores too. The S3 secret appears nowhere: not in any output,
// not in any stored object.
func TestRepoCycleUnderLoad(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	src, load := loadedSource(t, testdb.Options{LogFileSize: "8M", ServerID: 1}, 3, 60000)
	db := src.DB(t)
	r := newS3Repo(t, "ferry-backups", "prod-db1")
	tmp := testdb.ShortDir(t)
	keyFile := filepath.Join(tmp, "key.txt")
	public := strings.TrimSpace(mustFerry(t, "keygen", "--output", keyFile).stdout)
	fsRepo := filepath.Join(tmp, "fsrepo")
	os.MkdirAll(fsRepo, 0o750)

	load.Start()
	time.Sleep(time.Second)
	var outputs []string
	bk := r.run(t, repoBackupArgs(src, r.url, "--encrypt-to", public, "--part-size", "2M", "--max-rate", "20M")...)
	outputs = append(outputs, bk.stdout, bk.stderr)
	id := strings.TrimSpace(bk.stdout)
	bk2 := mustFerry(t, repoBackupArgs(src, fsRepo, "--compress", "lz4", "--max-rate", "20M")...)
	fsID := strings.TrimSpace(bk2.stdout)
	load.Stop(t)
	want := testdb.Checksums(t, db)

	list := listRepo(t, r.env, r.url)
	if len(list) != 1 || list[0].ID != id || list[0].Status != "complete" || !list[0].Restorable || list[0].GTID == "" {
		t.Fatalf("list: %+v, want backup %s complete with a GTID", list, id)
	}
	// 2M parts of a 120 MB backup are packed by their stored size, which compression
	// makes small and the workload makes vary: 3 objects or more.
	if list[0].Objects < 3 || list[0].StoredSize <= 0 || list[0].StoredSize >= list[0].Size {
		t.Errorf("list: %d objects, %d bytes stored of %d: want several parts, compressed", list[0].Objects, list[0].StoredSize, list[0].Size)
	}
	table := r.run(t, "list", "--repo", r.url)
	if !strings.Contains(table.stdout, id) || !strings.Contains(table.stdout, "complete") {
		t.Errorf("list table:\n%s", table.stdout)
	}
	ver := r.run(t, "verify", "--repo", r.url, "latest", "--identity-file", keyFile)
	if !strings.Contains(ver.stdout, "OK") || strings.Contains(ver.stdout, " 0 InnoDB pages") {
		t.Errorf("verify printed %q", ver.stdout)
	}
	outputs = append(outputs, table.stdout, ver.stdout, ver.stderr)

	for _, c := range []struct{ name, url, id string }{{"s3", r.url, id}, {"directory", fsRepo, fsID}} {
		t.Run(c.name, func(t *testing.T) {
			datadir := filepath.Join(tmp, "restored-"+c.name)
			rs := r.run(t, "restore", "--repo", c.url, c.id, "--datadir", datadir, "--identity-file", keyFile)
			outputs = append(outputs, rs.stdout, rs.stderr)
			checkReplica(t, src, load, datadir, restoredGTID(t, rs.stdout), want)
		})
	}
	noSecret(t, r, outputs)
}

// noSecret checks the S3 secret key is in no output of ferry and in no stored object.
func noSecret(t *testing.T, r *s3Repo, outputs []string) {
	t.Helper()
	for _, o := range outputs {
		if strings.Contains(o, testdb.S3SecretKey) {
			t.Fatalf("ferry printed the S3 secret key:\n%s", o)
		}
	}
	n := 0
	filepath.WalkDir(r.srv.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), testdb.S3SecretKey) || strings.Contains(string(b), testdb.S3AccessKey) {
			t.Errorf("stored object %s holds the S3 credentials", p)
		}
		n++
		return nil
	})
	if n == 0 {
		t.Fatal("no stored objects to check")
	}
}
