package testdb

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// BasedirMySQL8015 is where MySQL 8.0.15 (the redo layout before 8.0.30: ib_logfile0/1)
// is installed for the tests: $FERRY_MYSQL_8015, else /opt/mysql-8.0.15; "" if neither
// holds bin/mysqld.
func BasedirMySQL8015() string { return mysqlAt(os.Getenv("FERRY_MYSQL_8015"), "/opt/mysql-8.0.15") }

// NeedMySQL8015 returns BasedirMySQL8015, or stops a test that needs MySQL 8.0.15 where
// it is not installed (Missing: it fails under CI, skips elsewhere).
func NeedMySQL8015(t testing.TB) string {
	t.Helper()
	b := BasedirMySQL8015()
	if b == "" {
		Missing(t, "MySQL 8.0.15 is not installed (/opt/mysql-8.0.15 or FERRY_MYSQL_8015)", ".ci/run unpacks the MySQL 8.0.15 tarball into /opt/mysql-8.0.15")
	}
	return b
}

// StartMySQL8015 initializes a datadir with MySQL 8.0.15 (root@localhost, empty
// password) and runs mysqld on it with mariadb.LaunchPrivate, listening on a socket
// under a temp dir only; a cleanup stops it. It is the old server ferry must refuse,
// so it does no more than a server needs to answer: 4M redo files, no binlog, no
// performance_schema, and innodb_fast_shutdown=2 (the datadir is thrown away).
// StartMySQL cannot run it: 8.0.15 refuses innodb_redo_log_capacity (8.0.30) and
// skip_replica_start (8.0.26), which StartMySQL and mysql.StartPrivate give.
// The grant tables stay on, as on any server ferry backs up: root@localhost has an
// empty password, with which LaunchPrivate's wait connects. Initializing takes about
// 3 s on 2 cores, starting under 1 s.
func StartMySQL8015(t testing.TB) *mariadb.Private {
	t.Helper()
	needServers(t, "mysqld 8.0.15")
	base := NeedMySQL8015(t)
	dir := ShortDir(t)
	bin := filepath.Join(base, "bin", "mysqld")
	cfg := mariadb.PrivateConfig{Binary: bin, Datadir: filepath.Join(dir, "data"), RunDir: dir}
	// The options both runs take; --no-defaults must come first.
	common := []string{"--no-defaults", "--basedir=" + base, "--lc-messages-dir=" + filepath.Join(base, "share"),
		"--datadir=" + cfg.Datadir, "--innodb-log-file-size=4M", "--innodb-buffer-pool-size=32M", "--skip-log-bin"}
	if os.Geteuid() == 0 {
		common = append(common, "--user=root")
	}
	initialize := append(append([]string{}, common...), "--initialize-insecure")
	if out, err := exec.Command(bin, initialize...).CombinedOutput(); err != nil {
		t.Fatalf("mysqld 8.0.15 --initialize-insecure: %v\n%s%s", err, errorLines(string(out)), tail(string(out), 10))
	}
	args := append(common, "--socket="+cfg.SocketPath(), "--skip-networking", "--mysqlx=OFF",
		"--pid-file="+cfg.PidPath(), "--log-error="+cfg.ErrLogPath("mysqld"), "--performance-schema=OFF",
		"--innodb-fast-shutdown=2")
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	p, err := mariadb.LaunchPrivate(ctx, cfg, "mysqld", args)
	if err != nil {
		t.Fatalf("start mysqld 8.0.15: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("stop mysqld 8.0.15: %v", err)
		}
	})
	return p
}
