//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestEncryptionAtRest: a server encrypting its tables at rest with file_key_management
// (every InnoDB table, one table under a second key id, an Aria table), once with a
// plain key file (aes_cbc) and once with one encrypted by a password
// (file_key_management_filekey, aes_ctr) and an encrypted redo log
// (innodb_encrypt_log=ON), backed up under the bank workload to a directory, a stream
// and a repository. Each is restored with the key file at another path on this host,
// started with exactly the options --write-cnf wrote, and checked (invariants at its
// GTID, mariadb-check --extended, replication, checksums). A missing and a wrong key
// file each fail with one line and leave nothing; mariadb-backup prepares ferry's
// backup and ferry restores mariadb-backup's. A server encrypting its redo log is
// backed up under DDL, whose encrypted file-level records ferry reads with the key;
// a key file ferry cannot read refuses the backup before anything is written.
func TestEncryptionAtRest(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	for _, withPassword := range []bool{false, true} {
		name := "plain key file"
		if withPassword {
			name = "key file encrypted with a password, encrypted redo log"
		}
		t.Run(name, func(t *testing.T) { encryptionCycle(t, withPassword) })
	}
	t.Run("encrypted redo log under DDL", encryptedRedoUnderDDL)
}

// encryptedRedoUnderDDL backs up, to a stream slowed to 4 MiB/s, a server encrypting
// its redo log while tables are created, altered, renamed, truncated and dropped and a
// DATA DIRECTORY table is written, and restores it with the key file elsewhere and the
// DATA DIRECTORY table mapped away from the source's live file (whose name restore
// rewrites inside the encrypted redo records): every table the DDL loop left is there
// and readable, the DATA DIRECTORY table holds its invariant, and the source's file is
// untouched. A key file ferry cannot read, or one that is not the server's, refuses
// the backup before anything is written.
func encryptedRedoUnderDDL(t *testing.T) {
	tmp := testdb.ShortDir(t)
	keys, pw, args := keyFiles(t, tmp, true)
	src := testdb.Start(t, testdb.Options{ServerID: 1, Args: append(args, "--innodb-encrypt-log=ON", "--innodb-encrypt-tables=ON")})
	bad := filepath.Join(tmp, "bad-keys")
	os.WriteFile(bad, []byte("1;00112233445566778899aabbccddeeff\n"), 0o600)
	never := filepath.Join(tmp, "never")
	wantFail(t, nil, "innodb_encrypt_log=ON", append(backupArgs(src, never), "--key-file", filepath.Join(tmp, "missing"))...)
	if _, err := os.Stat(never); err == nil {
		t.Errorf("a refused backup created %s", never)
	}
	wantFail(t, nil, "does not decrypt", append(backupArgs(src, never), "--key-file", bad)...)
	ext := filepath.Join(tmp, "ext")
	os.MkdirAll(ext, 0o777)
	src.Exec(t, "CREATE DATABASE dd")
	src.Exec(t, fmt.Sprintf("CREATE TABLE dd.acct (id INT PRIMARY KEY, a BIGINT, b BIGINT, pad CHAR(200)) ENGINE=InnoDB DATA DIRECTORY='%s'", ext))
	src.Exec(t, "INSERT INTO dd.acct SELECT seq, 1000, 1000, REPEAT('x', 200) FROM dd.seq_1_to_20000")
	src.Exec(t, "CREATE TABLE dd.part (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
	src.Exec(t, "INSERT INTO dd.part SELECT seq, 0 FROM dd.seq_1_to_5000")
	flushAndCheckpoint(t, src) // the backup's redo then names dd/acct.ibd only in the writes during the copy
	ddl := testdb.NewDDL(t, src.DB(t))
	stopWrites := writeAccounts(t, src)
	stopDDL := runDDL(t, ddl)
	time.Sleep(500 * time.Millisecond)
	file := filepath.Join(tmp, "ddl.xbs")
	backupToFile(t, src, file, "--max-rate", "4M")
	stopDDL()
	stopWrites()
	src.Stop(t) // from here nothing but ferry could change the source's files
	before := treeState(t, ext)
	t.Logf("DDL statements during the backup: %d", ddl.Ops())
	datadir := filepath.Join(tmp, "restored")
	out := mustFerry(t, "restore", "--from", file, "--datadir", datadir, "--key-file", copyFile(t, keys, filepath.Join(tmp, "k2")),
		"--key-password-file", pw, "--data-directory-map", ext+"="+filepath.Join(tmp, "ext2"))
	if !strings.Contains(out.stderr, "redo_names_localized") {
		t.Errorf("restore did not rewrite the DATA DIRECTORY name in the encrypted redo log:\n%s", tail(out.stderr, 10))
	}
	s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2, Args: args})
	ddl.Check(t, s.DB(t))
	checkAccounts(t, s.DB(t))
	if after := treeState(t, ext); after != before {
		t.Errorf("the source's DATA DIRECTORY files changed during the restore:\n%s\n%s", before, after)
	}
}

func encryptionCycle(t *testing.T, withPassword bool) {
	tmp := testdb.ShortDir(t)
	keys, pw, args := keyFiles(t, tmp, withPassword)
	serverArgs := append(args, "--innodb-encrypt-tables=ON", "--aria-encrypt-tables=ON")
	if withPassword {
		serverArgs = append(serverArgs, "--innodb-encrypt-log=ON")
	}
	src, load := loadedSource(t, testdb.Options{ServerID: 1, Args: serverArgs}, 2, 10000)
	src.Exec(t, "CREATE DATABASE sec")
	src.Exec(t, "CREATE TABLE sec.k2 (id INT PRIMARY KEY, secret VARCHAR(100)) ENGINE=InnoDB ENCRYPTION_KEY_ID=2")
	src.Exec(t, "INSERT INTO sec.k2 SELECT seq, CONCAT('classified-', seq) FROM sec.seq_1_to_5000")
	src.Exec(t, "CREATE TABLE sec.aria (id INT PRIMARY KEY, secret VARCHAR(100)) ENGINE=Aria")
	src.Exec(t, "INSERT INTO sec.aria SELECT seq, CONCAT('aria-secret-', seq) FROM sec.seq_1_to_5000")
	flushAndCheckpoint(t, src) // the tables' pages are on disk before the backup, as on a production server
	for _, f := range []string{"sec/k2.ibd", "sec/aria.MAD"} {
		if b, _ := os.ReadFile(filepath.Join(src.Datadir, f)); len(b) == 0 || strings.Contains(string(b), "secret") || strings.Contains(string(b), "classified") {
			t.Fatalf("%s is empty or not encrypted on disk: the test would prove nothing", f)
		}
	}

	load.Start()
	time.Sleep(300 * time.Millisecond)
	dir := filepath.Join(tmp, "dir")
	r := mustFerry(t, backupArgs(src, dir)...)
	if !strings.Contains(r.stderr, "server_encryption_at_rest=") || !strings.Contains(r.stderr, "backup_encryption=none") {
		t.Errorf("the backup log does not tell the server's encryption from the backup's:\n%s", tail(r.stderr, 5))
	}
	stream := filepath.Join(tmp, "full.xbs")
	backupToFile(t, src, stream)
	repo := filepath.Join(tmp, "repo")
	dirRepoBackup(t, src, repo)
	mbDir := filepath.Join(tmp, "mb")
	mariabackup(t, src, mbDir)
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))
	if b, _ := os.ReadFile(filepath.Join(dir, "backup-my.cnf")); withPassword && strings.Contains(string(b), "filekey") {
		t.Errorf("backup-my.cnf records the key file's password:\n%s", b)
	}

	// The key files at another path on the restore host.
	elsewhere := filepath.Join(tmp, "restore-host")
	os.MkdirAll(elsewhere, 0o700)
	hostKeys := copyFile(t, keys, filepath.Join(elsewhere, "keys"))
	keyArgs := []string{"--key-file", hostKeys}
	if withPassword {
		keyArgs = append(keyArgs, "--key-password-file", copyFile(t, pw, filepath.Join(elsewhere, "pw")))
	}
	checkNativeApply(t, dir, keyArgs...)
	never := filepath.Join(tmp, "never")
	wantFail(t, nil, "--key-file", "restore", "--target-dir", dir, "--datadir", never)
	noDatadir(t, never)
	wrong, _, _ := keyFiles(t, testdb.ShortDir(t), false)
	wantFail(t, nil, "not the source's key file", "restore", "--target-dir", dir, "--datadir", never, "--key-file", wrong)
	noDatadir(t, never)
	if ents, _ := filepath.Glob(filepath.Join(tmp, ".never*")); len(ents) > 1 || len(ents) == 1 && !strings.HasSuffix(ents[0], ".ferry-prepare.err") {
		t.Errorf("a refused restore left %v (only the failed recovery's error log may stay)", ents)
	}

	// mariadb-backup --prepare reads the key plugin's options from backup-my.cnf; ferry
	// never records the key file's password there, and mariadb-backup takes no
	// file_key_management_filekey on its command line, so the copy it prepares names the
	// same keys in plain (with the encrypted redo log, this is the reverse interop).
	mbPrepared := copyBackup(t, dir, filepath.Join(tmp, "ferry-mb-prepared"))
	if withPassword {
		cnf := filepath.Join(mbPrepared, "backup-my.cnf")
		b, _ := os.ReadFile(cnf)
		os.WriteFile(cnf, []byte(strings.ReplaceAll(string(b), keys, strings.TrimSuffix(keys, ".enc"))), 0o600)
	}
	if out, err := exec.Command("mariadb-backup", "--prepare", "--target-dir="+mbPrepared).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --prepare of ferry's backup of an encrypted server: %v\n%s", err, tail(string(out), 20))
	}
	t.Run("clone", func(t *testing.T) {
		datadir := filepath.Join(tmp, "data-clone")
		out := cloneOf(t, src, tmp, datadir, keyArgs...)
		args := []string{"--plugin-load-add=file_key_management", "--file-key-management-filename=" + hostKeys, args[1]} // args[1]: the algorithm
		if withPassword {
			args = append(args, "--file-key-management-filekey=FILE:"+filepath.Join(elsewhere, "pw"))
		}
		checkRestored(t, src, load, datadir, clonedGTID(t, out.stdout), args, want, checkSecrets)
	})
	t.Run("a page ferry does not decrypt", func(t *testing.T) {
		datadir := filepath.Join(tmp, "data-fallback")
		cnf := filepath.Join(tmp, "fallback.cnf")
		out := ferry(t, []string{"FERRY_TEST_FAIL=apply-decrypt"}, append([]string{"restore", "--datadir", datadir, "--write-cnf", cnf, "--target-dir", dir}, keyArgs...)...)
		if out.err != nil || !strings.Contains(out.stderr, fellBack) || !strings.Contains(out.stderr, "injected decryption failure") {
			t.Fatalf("the restore did not fall back to the server with the reason: %v\n%s", out.err, out.stderr)
		}
		checkRestored(t, src, load, datadir, restoredGTID(t, out.stdout), cnfArgs(t, cnf), want, checkSecrets)
	})
	for _, c := range []struct {
		name string
		from []string
	}{
		{"directory", []string{"--target-dir", dir}},
		{"stream", []string{"--from", stream}},
		{"repository", []string{"--repo", repo, "latest"}},
		{"mariadb-backup's backup", []string{"--target-dir", mbDir}},
		{"prepared by mariadb-backup", []string{"--target-dir", mbPrepared}},
	} {
		t.Run(c.name, func(t *testing.T) {
			slug := strings.NewReplacer(" ", "-", "'", "").Replace(c.name)
			datadir := filepath.Join(tmp, "data-"+slug)
			cnf := filepath.Join(tmp, slug+".cnf")
			out := mustFerry(t, append(append([]string{"restore", "--datadir", datadir, "--write-cnf", cnf}, c.from...), keyArgs...)...)
			args := cnfArgs(t, cnf)
			if !strings.Contains(strings.Join(args, " "), "--file-key-management-filename="+hostKeys) {
				t.Errorf("--write-cnf does not load the key plugin with this host's key file: %v", args)
			}
			checkRestored(t, src, load, datadir, restoredGTID(t, out.stdout), args, want, checkSecrets)
		})
	}
}

// flushAndCheckpoint writes every dirty page and makes a checkpoint, so that the
// next backup's redo starts after the tables were written.
func flushAndCheckpoint(t testing.TB, s *testdb.Server) {
	t.Helper()
	s.Exec(t, "SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0.001")
	s.Exec(t, "SET GLOBAL innodb_max_dirty_pages_pct = 0")
	deadline := time.Now().Add(time.Minute)
	for s.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_PAGES_DIRTY'") != "0" {
		if time.Now().After(deadline) {
			t.Fatal("dirty pages were not flushed within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Exec(t, "SET GLOBAL innodb_log_checkpoint_now = ON")
	s.Exec(t, "FLUSH TABLES")
	s.Exec(t, "SET GLOBAL innodb_max_dirty_pages_pct = 90")
}

// checkSecrets reads the tables of the second key id and the encrypted Aria table.
func checkSecrets(t testing.TB, s *testdb.Server) {
	t.Helper()
	got := s.QueryString(t, "SELECT CONCAT((SELECT COUNT(*) FROM sec.k2 WHERE secret LIKE 'classified-%'), ' ', (SELECT COUNT(*) FROM sec.aria WHERE secret LIKE 'aria-secret-%'))")
	if got != "5000 5000" {
		t.Errorf("encrypted tables of the restored copy: %s rows, want 5000 5000", got)
	}
}

// keyFiles writes a file_key_management key file with key ids 1 and 2 (encrypted
// with a password, as `openssl enc -aes-256-cbc -md sha1` makes it, when asked) and
// returns it, the password file, and the server options that load it.
func keyFiles(t testing.TB, dir string, withPassword bool) (keys, pw string, args []string) {
	t.Helper()
	keys = filepath.Join(dir, "keys.txt")
	plain := run(t, "", "openssl", "rand", "-hex", "32")
	plain2 := run(t, "", "openssl", "rand", "-hex", "32")
	if err := os.WriteFile(keys, []byte("1;"+strings.TrimSpace(plain)+"\n2;"+strings.TrimSpace(plain2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args = []string{"--plugin-load-add=file_key_management", "--file-key-management-encryption-algorithm=aes_cbc"}
	if !withPassword {
		return keys, "", append(args, "--file-key-management-filename="+keys)
	}
	args[1] = "--file-key-management-encryption-algorithm=aes_ctr" // the plugin's other algorithm
	pw = filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("correct horse battery staple"), 0o600); err != nil {
		t.Fatal(err)
	}
	enc := keys + ".enc"
	run(t, "", "openssl", "enc", "-aes-256-cbc", "-md", "sha1", "-pass", "file:"+pw, "-in", keys, "-out", enc)
	return enc, pw, append(args, "--file-key-management-filename="+enc, "--file-key-management-filekey=FILE:"+pw)
}

// copyFile copies a small file to a new path and returns that path.
func copyFile(t testing.TB, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}
