package sst

import (
	"context"
	"fmt"
	"net"
	"os/user"
	"regexp"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/mariadb"
)

// Donate is the donor's side: dial the joiner and send it a hot copy of the local
// server (BACKUP STAGE, never FLUSH TABLES WITH READ LOCK: the donor stays writable;
// the three-stage copy, so the joiner's recovery is short; the Galera position read
// under BLOCK_COMMIT), or on an IST (--bypass) only the joiner's own position; then
// print "done uuid:seqno" once the joiner has acknowledged everything.
func Donate(ctx context.Context, a Args, c Config, env Env) error {
	sec, err := c.security()
	if err != nil {
		return err
	}
	to, salt, err := joinerAddress(a.Address)
	if err != nil {
		return err
	}
	sec.Salt = []byte(salt)
	ctx, cancel := watchParent(ctx, a.Parent)
	defer cancel(nil)
	conn, err := c.serverConn(a)
	if err != nil {
		return err
	}
	cfg := clone.DonateConfig{To: to, Serve: clone.ServeConfig{Security: sec, MaxRate: c.MaxRate, MaxImpact: c.MaxImpact, Log: env.Log, Grace: c.Grace,
		Backup: backup.Config{Conn: conn, Parallel: c.Parallel, ChunkSize: backup.DefaultStreamChunkSize, Log: env.Log,
			Spool: backup.SpoolOptions{Dir: c.Tmpdir, Max: c.MaxSpool}, Version: env.Version, Command: "ferry sst --role donor"}}}
	if a.Bypass {
		pos, err := mariadb.ParseWsrepPosition(a.GTID)
		if err != nil {
			return fmt.Errorf("--gtid: %w", err)
		}
		pos.Domain = a.GTIDDomainID
		cfg.Bypass = pos.Line()
		env.Log.Info("IST: telling the joiner its position; no copy", "joiner", to, "position", pos.String())
	} else {
		env.Log.Info("sending a hot copy", "joiner", to, "auth", sec.Describe())
	}
	t0 := time.Now()
	if err := clone.Donate(ctx, cfg); err != nil {
		return err
	}
	if !a.Bypass {
		env.Log.Info("the joiner has the whole copy", "took", time.Since(t0).Round(time.Millisecond))
	}
	_, err = fmt.Fprintf(env.Out, "done %s\n", a.GTID)
	return err
}

// joinerAddress is the host:port of the joiner's "ready" address and the salt after
// ferry's tag in its path: a joiner of another method or protocol version is refused.
func joinerAddress(s string) (addr, salt string, err error) {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = s[i+1:]
	}
	host, port, err := splitAddress(s)
	if err != nil {
		return "", "", err
	}
	_, path, _ := strings.Cut(s, "/")
	tag, salt, _ := strings.Cut(path, "/")
	if tag != addressTag || !saltRe.MatchString(salt) {
		return "", "", fmt.Errorf("the joiner's address %q is not ferry's SST (protocol %s): run the same ferry version on every node, with wsrep_sst_method=ferry", s, addressTag)
	}
	if port == "" {
		port = DefaultPort
	}
	return net.JoinHostPort(host, port), salt, nil
}

// saltRe is the joiner's per-SST salt: 16 random bytes in hex.
var saltRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// serverConn is the donor's connection to its own server: the socket (or the client
// port) mariadbd gave, as the user of wsrep_sst_auth, or with none as this OS user
// through unix_socket authentication.
func (c Config) serverConn(a Args) (mariadb.ConnConfig, error) {
	conn := mariadb.ConnConfig{Socket: a.Socket}
	if conn.Socket == "" {
		conn.Host, conn.Port = "127.0.0.1", a.LocalPort
	}
	if c.Auth != "" {
		conn.User, conn.Password, _ = strings.Cut(c.Auth, ":")
	} else {
		u, err := user.Current()
		if err != nil {
			return conn, fmt.Errorf("no wsrep_sst_auth and no OS user name for unix_socket authentication: %w", err)
		}
		conn.User = u.Username
	}
	if conn.Socket == "" && conn.Port == 0 {
		return conn, fmt.Errorf("mariadbd gave neither --socket nor --local-port: cannot reach the donor server")
	}
	return conn.Resolve()
}
