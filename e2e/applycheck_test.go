//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/ferry-backup/ferry/internal/pagediff"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// checkNativeApply proves ferry's redo apply against the server's own recovery on the
// backup directory backupDir, which it leaves untouched: one copy is prepared by
// mariadb-backup --prepare (which changes only the pages the redo names), one by
// ferry prepare --recovery native (which fails rather than fall back to the server),
// and every page of every tablespace must be equal (pagediff). keyArgs are ferry's
// key flags for a backup of a server that encrypts at rest; mariadb-backup gets the
// same keys through the copy's backup-my.cnf.
func checkNativeApply(t *testing.T, backupDir string, keyArgs ...string) {
	t.Helper()
	t.Run("native apply matches the server's recovery", func(t *testing.T) {
		mb := testdb.Tool(t, "mariadb-backup", "mariadb-backup")
		tmp := t.TempDir()
		native := copyBackup(t, backupDir, filepath.Join(tmp, "ferry"))
		nativePrepare(t, append([]string{"prepare", "--target-dir", native, "--recovery", "native"}, keyArgs...))
		oracle := copyBackup(t, backupDir, filepath.Join(tmp, "server"))
		useKeys(t, oracle, keyArgs)
		mbPrepare(t, mb, "--target-dir="+oracle)
		compareApplied(t, backupDir, oracle, native, keyArgs)
		recoveryChanged(t, backupDir, oracle)
	})
}

// recoveryChanged fails the test if the server's recovery changed no page of the
// backup: then the comparison proved nothing.
func recoveryChanged(t *testing.T, backupDir, oracle string) {
	t.Helper()
	rep, err := pagediff.Dirs(backupDir, oracle, pagediff.Options{})
	if err != nil {
		t.Fatalf("compare the backup with its prepared copy: %v", err)
	}
	n := len(rep.Mismatches) + rep.MoreMismatches
	t.Logf("the server's recovery changed %d pages and %d file lengths", n, len(rep.Lengths))
	if n == 0 {
		t.Errorf("the server's recovery changed no page of the backup: the native apply check proves nothing here")
	}
}

// checkNativeChain is checkNativeApply for an incremental chain (an incremental
// cannot be prepared alone): the full backup prepared by mariadb-backup and then each
// incremental applied with --incremental-dir, against ferry's restore of the chain
// with --recovery native. The backups are left untouched.
func checkNativeChain(t *testing.T, full string, incs []string, keyArgs ...string) {
	t.Helper()
	t.Run("native chain apply matches the server's recovery", func(t *testing.T) {
		mb := testdb.Tool(t, "mariadb-backup", "mariadb-backup")
		tmp := t.TempDir()
		native := filepath.Join(tmp, "ferry")
		args := []string{"restore", "--target-dir", full, "--datadir", native, "--recovery", "native"}
		for _, d := range incs {
			args = append(args, "--incremental-dir", d)
		}
		nativePrepare(t, append(args, keyArgs...))
		oracle := copyBackup(t, full, filepath.Join(tmp, "server"))
		useKeys(t, oracle, keyArgs)
		mbPrepare(t, mb, "--target-dir="+oracle)
		for i, d := range incs {
			inc := copyBackup(t, d, filepath.Join(tmp, "inc"+strconv.Itoa(i+1)))
			mbPrepare(t, mb, "--target-dir="+oracle, "--incremental-dir="+inc)
		}
		compareApplied(t, incs[len(incs)-1], oracle, native, keyArgs)
	})
}

// nativePrepare runs ferry's native apply (args: a prepare or restore with
// --recovery native). A refusal fails the test, unless its reason is one of the page
// formats native apply does not write yet (nativeGaps): the check is skipped then.
func nativePrepare(t *testing.T, args []string) {
	t.Helper()
	r := ferry(t, nil, args...)
	if r.err == nil {
		return
	}
	for _, gap := range nativeGaps {
		if strings.Contains(r.stderr, gap) {
			t.Skipf("native apply does not write these pages yet: %s", lastLine(r.stderr))
		}
	}
	t.Fatalf("ferry %s: %v\n%s", strings.Join(args, " "), r.err, tail(r.stderr, 20))
}

// compareApplied fails the test with every page that differs between the server's
// prepared copy oracle and ferry's native one, encrypted and page_compressed pages
// compared in their plain form, each page named with the last records the log of
// backupDir (the unprepared backup) applies to it.
func compareApplied(t *testing.T, backupDir, oracle, native string, keyArgs []string) {
	t.Helper()
	keys, alg := keysOf(t, backupDir, keyArgs)
	h, err := apply.ReadHistory(filepath.Join(backupDir, "ib_logfile0"), keys, alg)
	if err != nil {
		t.Fatalf("read the backup's redo log: %v", err)
	}
	decode, err := pagediff.CodecDecoder(oracle, innodb.KeyFunc(keys), alg)
	if err != nil {
		t.Fatalf("set up the page codecs: %v", err)
	}
	rep, err := pagediff.Dirs(oracle, native, pagediff.Options{Decode: decode, Explain: h})
	if err != nil {
		t.Fatalf("compare the prepared copies: %v", err)
	}
	t.Logf("pagediff: %d pages in %d files compared, %d freed or free pages ignored, %d decoded, %d compared raw",
		rep.Compared, rep.Files, rep.Ignored, rep.Decoded, rep.Undecoded)
	if err := rep.Err(); err != nil {
		for _, m := range rep.Mismatches {
			t.Logf("mismatch: %s page %d byte %d (server %#02x, ferry %#02x) %s", m.File, m.Page, m.Offset, m.Oracle, m.Native, m.Problem)
		}
		t.Fatal(err)
	}
}

// keysOf returns the keys ferry's key flags keyArgs name and the backup's encryption
// algorithm, for a backup in dir of a server encrypting at rest; nil otherwise.
func keysOf(t *testing.T, dir string, keyArgs []string) (redo.KeyFunc, string) {
	t.Helper()
	kf := flagValue(keyArgs, "--key-file")
	if kf == "" {
		return nil, ""
	}
	k, err := keyfile.Files{KeyFile: kf, PasswordFile: flagValue(keyArgs, "--key-password-file")}.Load()
	if err != nil {
		t.Fatalf("load the key file: %v", err)
	}
	cnf, err := xtrabackup.ReadMyCnf(dir)
	if err != nil {
		t.Fatal(err)
	}
	alg := optfile.Value(cnf["file_key_management_encryption_algorithm"])
	if alg == "" {
		alg = "aes_cbc" // the plugin's default
	}
	return k.Key, alg
}

// useKeys makes mariadb-backup --prepare of the backup copy dir find the key file
// ferry is given in keyArgs: backup-my.cnf names the source's key file, and
// mariadb-backup takes no key password, so a key file encrypted with one is decrypted
// (as openssl enc, which file_key_management reads) into a plain one beside the copy.
func useKeys(t *testing.T, dir string, keyArgs []string) {
	t.Helper()
	keys, pw := flagValue(keyArgs, "--key-file"), flagValue(keyArgs, "--key-password-file")
	if keys == "" {
		return
	}
	if pw != "" {
		plain := filepath.Join(filepath.Dir(dir), "plain-keys")
		run(t, "", "openssl", "enc", "-d", "-aes-256-cbc", "-md", "sha1", "-pass", "file:"+pw, "-in", keys, "-out", plain)
		keys = plain
	}
	cnf := filepath.Join(dir, "backup-my.cnf")
	b, err := os.ReadFile(cnf)
	if err != nil {
		t.Fatalf("the encrypted backup has no backup-my.cnf: %v", err)
	}
	lines, found := strings.Split(string(b), "\n"), false
	for i, l := range lines {
		name, _, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		switch optfile.Name(name) {
		case "file_key_management_filename":
			lines[i], found = name+"="+keys, true
		case "file_key_management_filekey":
			lines[i] = "" // the key file is plain now
		}
	}
	if !found {
		t.Fatalf("backup-my.cnf of an encrypted backup does not name the key file:\n%s", b)
	}
	if err := os.WriteFile(cnf, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// flagValue returns the value following flag in args, or "".
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}
