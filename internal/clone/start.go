package clone

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/mysql"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/setting"
)

// startAndReplicate starts the local mariadbd on the new datadir and, with Replicate,
// makes it a replica of the donor. If the server does not start, the clone is moved
// aside and the previous datadir put back.
func startAndReplicate(ctx context.Context, cfg Config, res *Result, w welcome) error {
	series, _, _ := mariadb.Series(w.ServerVersion)
	find, server := mariadb.FindMysqldFor, "mariadbd"
	if res.MySQL {
		find, server = mysql.FindMysqld, "mysqld"
	}
	bin, err := find(ctx, cfg.Mariadbd, series)
	if err != nil {
		return err
	}
	local, err := localConn(ctx, cfg, bin)
	if err != nil {
		return rollback(res, err)
	}
	cfg.Log.Info("starting "+server+" on the clone", "datadir", res.Datadir, "defaults_file", cfg.DefaultsFile)
	// The layout options the clone needs (page size, system and undo tablespaces); the
	// key plugin, if the donor encrypts data at rest, must be in the host's my.cnf.
	layout := restore.ServerOptions{Layout: res.Options.Layout}
	args := layout.Args()
	if base := mysql.Basedir(bin); res.MySQL && base != "" { // an unpacked tarball: its share/
		args = append(args, "--basedir="+base, "--lc-messages-dir="+base+"/share")
	}
	srv, err := mariadb.StartServer(ctx, bin, cfg.DefaultsFile, res.Datadir, args, local, cfg.StartTimeout)
	if err != nil {
		if srv != nil {
			srv.Stop(time.Minute)
		}
		tail := logTail(srv)
		return rollback(res, fmt.Errorf("the cloned server did not start: %v%s", err, tail))
	}
	res.Server = srv
	cfg.Log.Info("the clone is running", "pid", srv.Pid)
	if !cfg.Replicate {
		return nil
	}
	db, err := mariadb.Open(ctx, local)
	if err != nil {
		return fmt.Errorf("connect to the started clone: %w", err)
	}
	defer db.Close()
	var id uint32
	if err := db.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
		return fmt.Errorf("read the clone's server_id: %w", err)
	}
	if id == w.ServerID {
		return setting.Errorf("the clone has server_id %d, the same as the donor: set a unique server_id in its my.cnf, restart it, then run the replication commands ferry prints without %s", id, setting.Replicate)
	}
	cfg.Log.Info("starting replication from the donor", "primary", fmt.Sprintf("%s:%d", res.Replica.Host, res.Replica.Port), "gtid", res.Replica.GTID)
	start := mariadb.StartReplica
	if res.MySQL {
		start = func(ctx context.Context, db *sql.DB, r mariadb.Replica, timeout time.Duration) error {
			return mysql.StartReplica(ctx, db, w.ServerVersion, r.GTID, mysql.Source{Host: r.Host, Port: r.Port, User: r.User, Password: r.Password}, timeout)
		}
	}
	if err := start(ctx, db, res.Replica, 2*time.Minute); err != nil {
		return fmt.Errorf("the clone is running but replication did not start: %w", err)
	}
	res.Replicating = true
	return nil
}

// localConn is how ferry reaches the server it starts: --socket/--port/--user as
// given, else the socket from the server's own options.
func localConn(ctx context.Context, cfg Config, bin string) (mariadb.ConnConfig, error) {
	c := cfg.Local
	if c.Socket == "" && c.Host == "" {
		opts, err := mariadb.ServerOptions(ctx, bin, cfg.DefaultsFile)
		if err != nil {
			return c, err
		}
		c.Socket = opts["socket"]
	}
	return c.Resolve()
}

// rollback moves a clone that did not start aside (kept for diagnosis) and puts the
// previous datadir's contents back (renames only: the datadir may be a mount point).
func rollback(res *Result, cause error) error {
	failed, err := restore.PutBack(res.Datadir, res.MovedAside)
	switch {
	case err != nil && failed == "":
		return fmt.Errorf("%w; moving the clone aside also failed: %v", cause, err)
	case err != nil:
		return fmt.Errorf("%w; the clone is in %s, and putting the previous datadir %s back failed: %v", cause, failed, res.MovedAside, err)
	case res.MovedAside != "":
		return fmt.Errorf("%w; the previous datadir is back in place and the clone kept in %s", cause, failed)
	}
	return fmt.Errorf("%w; the clone is kept in %s", cause, failed)
}

// logTail is the end of the started server's output, for the error message.
func logTail(s *mariadb.Server) string {
	if s == nil {
		return ""
	}
	b, err := os.ReadFile(s.LogPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return " (" + strings.Join(lines, " | ") + ")"
}
