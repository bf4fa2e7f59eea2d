package testdb

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// mysqlInitialized holds the datadirs this test binary initialized, by basedir and
// initialize options, each under a /tmp/ferry-mysql-init-<pid>-* directory.
// mysqld --initialize takes about 3 s on 2 cores, a copy of its 87 MB a fraction of
// that, so every fresh MySQL server starts from a copy. Like handedOut (ports.go), it
// is state of the test binary, not of a test; a later test binary removes the
// directories of one that has exited (sweepInitialized).
var mysqlInitialized = struct {
	sync.Mutex
	dirs map[string]string
}{dirs: map[string]string{}}

// mysqlInitPrefix begins the names of the initialized datadirs' parent directories.
const mysqlInitPrefix = "ferry-mysql-init-"

// copyInitialized copies a datadir initialized with basedir's mysqld and args to dst,
// without auto.cnf, so the server makes itself a new server_uuid at its first start.
func copyInitialized(t testing.TB, basedir string, args []string, dst string) {
	t.Helper()
	src := initialized(t, basedir, args)
	if err := copyDir(src, dst, "auto.cnf"); err != nil {
		t.Fatalf("copy the initialized datadir %s: %v", src, err)
	}
}

// initialized returns the datadir initialized with basedir and args, initializing it
// the first time it is asked for.
func initialized(t testing.TB, basedir string, args []string) string {
	t.Helper()
	key := strings.Join(append([]string{basedir}, args...), "\x00")
	mysqlInitialized.Lock()
	defer mysqlInitialized.Unlock()
	if d, ok := mysqlInitialized.dirs[key]; ok {
		return d
	}
	if len(mysqlInitialized.dirs) == 0 {
		sweepInitialized()
	}
	parent, err := os.MkdirTemp("/tmp", fmt.Sprintf("%s%d-", mysqlInitPrefix, os.Getpid()))
	if err != nil {
		t.Fatalf("temp dir for an initialized datadir: %v", err)
	}
	d := filepath.Join(parent, "data")
	if err := initializeMySQL(basedir, d, args); err != nil {
		os.RemoveAll(parent)
		t.Fatal(err)
	}
	mysqlInitialized.dirs[key] = d
	return d
}

// initializeMySQL runs mysqld --initialize-insecure (root@localhost with an empty
// password) into datadir, retrying once like installDB.
func initializeMySQL(basedir, datadir string, args []string) error {
	bin := filepath.Join(basedir, "bin", "mysqld")
	cmd := append([]string{"--no-defaults", "--initialize-insecure", "--basedir=" + basedir, "--datadir=" + datadir,
		"--lc-messages-dir=" + filepath.Join(basedir, "share"), "--user=root", "--innodb-redo-log-capacity=8M"}, args...)
	for attempt := 1; ; attempt++ {
		out, err := exec.Command(bin, cmd...).CombinedOutput()
		if err == nil {
			return nil
		}
		msg := fmt.Sprintf("mysqld --initialize-insecure --datadir=%s: %v\n%s%s", datadir, err, errorLines(string(out)), tail(string(out), 10))
		if attempt == 2 {
			return errors.New(msg)
		}
		os.RemoveAll(datadir)
		time.Sleep(time.Second)
	}
}

// sweepInitialized removes the initialized datadirs of test binaries that have exited.
func sweepInitialized() {
	dirs, _ := filepath.Glob(filepath.Join("/tmp", mysqlInitPrefix+"*"))
	for _, d := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), mysqlInitPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err == nil && pid > 0 && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// copyDir copies the tree src to dst (which must not exist), files and directories
// with their permissions, leaving out the top-level entries named in skip.
func copyDir(src, dst string, skip ...string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.Mkdir(target, info.Mode().Perm())
		}
		return copyFile(path, target, info.Mode().Perm())
	})
}

// copyFile copies one regular file (copy_file_range on Linux).
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
