package mysql

import (
	"context"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// StartPrivate starts MySQL's mysqld with no networking, no replica threads and no
// grant checks on a private socket (mariadb.LaunchPrivate runs it), and waits until it
// accepts connections: its crash recovery has then run. It shuts down slowly
// (innodb_fast_shutdown=0), so the copy needs no recovery and no purge at its next
// start.
func StartPrivate(ctx context.Context, cfg mariadb.PrivateConfig) (*mariadb.Private, error) {
	args := append([]string{"--no-defaults"}, cfg.Args...)
	if base := Basedir(cfg.Binary); base != "" {
		args = append(args, "--basedir="+base, "--lc-messages-dir="+filepath.Join(base, "share"))
	}
	args = append(args, "--datadir="+cfg.Datadir, "--socket="+cfg.SocketPath(), "--skip-networking",
		"--pid-file="+cfg.PidPath(), "--log-error="+cfg.ErrLogPath("mysqld"),
		"--skip-replica-start", "--event-scheduler=OFF", "--skip-grant-tables", "--mysqlx=OFF",
		"--performance-schema=OFF", "--innodb-buffer-pool-load-at-startup=OFF",
		"--innodb-buffer-pool-dump-at-shutdown=OFF", "--innodb-fast-shutdown=0", "--secure-file-priv=",
		"--auto-generate-certs=OFF", "--sha256-password-auto-generate-rsa-keys=OFF",
		"--caching-sha2-password-auto-generate-rsa-keys=OFF")
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	return mariadb.LaunchPrivate(ctx, cfg, "mysqld", args)
}
