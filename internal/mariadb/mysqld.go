package mariadb

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferry-backup/ferry/internal/setting"
)

// FindMysqld returns the mariadbd binary: the one spec names, else the first of
// mariadbd/mysqld on PATH or in the usual directories (FindMysqldFor without a series).
func FindMysqld(spec string) (string, error) {
	return FindMysqldFor(context.Background(), spec, "")
}

// seriesKey is the SERIES of a SERIES=PATH entry of a mariadbd spec.
var seriesKey = regexp.MustCompile(`^\d+\.\d+$`)

// FindMysqldFor returns the mariadbd to run a datadir of series ("11.4"; "" for any).
// spec is what the user gave: "" (search), a binary, an installation directory (its
// bin/ or sbin/mariadbd), and SERIES=PATH entries separated by commas (from an option
// file's mariadbd-SERIES=). A binary or directory given is used as it is; otherwise
// the entry for series, then mariadbd and mysqld on PATH, in /usr/sbin, /usr/libexec,
// /usr/local/mysql/bin, /opt/mariadb-SERIES/bin and /usr/local/mariadb-SERIES/bin are
// tried (every directory of PATH), and the first of series is returned, or else the
// first found (whose version the caller then refuses, naming it).
func FindMysqldFor(ctx context.Context, spec, series string) (string, error) {
	var cands []string
	explicit := ""
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if k, path, ok := strings.Cut(part, "="); ok && seriesKey.MatchString(k) {
			if k == series {
				cands = append(cands, path)
			}
			continue
		}
		if part != "" {
			explicit = part
		}
	}
	if explicit != "" {
		return explicitMysqld(explicit)
	}
	dirs := append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/libexec", "/usr/local/mysql/bin")
	for _, name := range []string{"mariadbd", "mysqld"} {
		for _, dir := range dirs {
			if dir != "" {
				cands = append(cands, filepath.Join(dir, name))
			}
		}
	}
	if series != "" {
		cands = append(cands, filepath.Join("/opt/mariadb-"+series, "bin", "mariadbd"), filepath.Join("/usr/local/mariadb-"+series, "bin", "mariadbd"))
	}
	first := ""
	for _, c := range cands {
		if fi, err := os.Stat(c); err != nil || fi.IsDir() {
			continue
		}
		if series == "" {
			return c, nil
		}
		if first == "" {
			first = c
		}
		if v, err := MysqldVersion(ctx, c); err == nil {
			if got, _, ok := Series(v); ok && got == series {
				return c, nil
			}
		}
	}
	if first == "" {
		return "", setting.Errorf("mariadbd not found on PATH or in /usr/sbin: install mariadb-server of the backup's version or pass %s", setting.Mariadbd)
	}
	return first, nil
}

// explicitMysqld is the binary a given path names: itself, or an installation
// directory's bin/mariadbd, sbin/mariadbd or bin/mysqld.
func explicitMysqld(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", setting.Errorf("%s %s: %w", setting.Mariadbd, path, err)
	}
	if !fi.IsDir() {
		return path, nil
	}
	for _, rel := range []string{"bin/mariadbd", "sbin/mariadbd", "bin/mysqld"} {
		if p := filepath.Join(path, rel); fileExists(p) {
			return p, nil
		}
	}
	return "", setting.Errorf("%s %s: a directory without bin/mariadbd or sbin/mariadbd", setting.Mariadbd, path)
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

var mysqldVerRe = regexp.MustCompile(`Ver (\d+\.\d+\.\d+)-MariaDB`)

// MysqldVersion runs `mariadbd --version` and returns e.g. "10.11.19".
func MysqldVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "--no-defaults", "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	m := mysqldVerRe.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s is not a MariaDB server (%s)", bin, strings.TrimSpace(string(out)))
	}
	return string(m[1]), nil
}

// PrivateConfig describes a private, networkless mariadbd run on a datadir.
type PrivateConfig struct {
	Binary  string
	Datadir string
	RunDir  string   // holds socket, pid file and error log; must be short (socket path limit)
	Args    []string // extra server options, e.g. from backup-my.cnf
	ErrLog  string   // error log; default mariadbd.err in RunDir
}

// Private is a running private server (mariadbd, or MySQL's mysqld: LaunchPrivate).
type Private struct {
	cfg     PrivateConfig
	program string // "mariadbd", "mysqld": for messages
	cmd     *exec.Cmd
	done    chan error
	Socket  string
	ErrLog  string
	db      *sql.DB
}

// SocketPath is where a private server of cfg listens.
func (cfg PrivateConfig) SocketPath() string { return filepath.Join(cfg.RunDir, "m.sock") }

// PidPath is where a private server of cfg writes its pid.
func (cfg PrivateConfig) PidPath() string { return filepath.Join(cfg.RunDir, "m.pid") }

// ErrLogPath is the error log of a private server of cfg: cfg.ErrLog, or program.err
// in RunDir.
func (cfg PrivateConfig) ErrLogPath(program string) string {
	if cfg.ErrLog != "" {
		return cfg.ErrLog
	}
	return filepath.Join(cfg.RunDir, program+".err")
}

// StartPrivate starts mariadbd with no networking, no binlog, no replica threads and
// no grant checks on a private socket, and waits until it accepts connections.
func StartPrivate(ctx context.Context, cfg PrivateConfig) (*Private, error) {
	args := append([]string{"--no-defaults"}, cfg.Args...)
	// --skip-ssl: no networking, so no TLS; 11.4 otherwise makes a certificate at every
	// start, seconds of CPU (a small prepare took 9.0 s with it, 0.66 s without).
	args = append(args, "--datadir="+cfg.Datadir, "--socket="+cfg.SocketPath(), "--skip-networking", "--skip-ssl",
		"--pid-file="+cfg.PidPath(), "--log-error="+cfg.ErrLogPath("mariadbd"),
		"--skip-log-bin", "--skip-slave-start", "--event-scheduler=OFF", "--skip-grant-tables",
		"--wsrep-on=OFF", "--innodb-buffer-pool-load-at-startup=OFF", "--innodb-buffer-pool-dump-at-shutdown=OFF")
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	return LaunchPrivate(ctx, cfg, "mariadbd", args)
}

// LaunchPrivate starts cfg.Binary with args, which must make it listen on
// cfg.SocketPath() only, log to cfg.ErrLogPath(program) and skip the grant tables, and
// waits until root reaches it: the one private-server runner of both families.
func LaunchPrivate(ctx context.Context, cfg PrivateConfig, program string, args []string) (*Private, error) {
	p := &Private{cfg: cfg, program: program, Socket: cfg.SocketPath(), ErrLog: cfg.ErrLogPath(program)}
	p.cmd = exec.Command(cfg.Binary, args...)
	// Its own process group (a terminal's Ctrl-C goes to ferry, which shuts it down
	// cleanly), and killed with ferry: a ferry killed with SIGKILL leaves no server
	// running on the copy.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Binary, err)
	}
	p.done = make(chan error, 1)
	go func() { p.done <- p.cmd.Wait() }()
	if err := p.waitReady(ctx); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

func (p *Private) waitReady(ctx context.Context) error {
	db, err := sql.Open("mysql", "root@unix("+p.Socket+")/?timeout=5s")
	if err != nil {
		return fmt.Errorf("private server: %w", err)
	}
	for {
		select {
		case err := <-p.done:
			db.Close()
			p.done <- err
			return fmt.Errorf("%s exited during recovery (%v): %s", p.program, err, p.LogErrors())
		case <-ctx.Done():
			db.Close()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := os.Stat(p.Socket); err != nil {
			continue
		}
		if err := db.PingContext(ctx); err == nil {
			p.db = db
			return nil
		}
	}
}

// DB returns a connection pool to the private server (root, grants skipped).
func (p *Private) DB() *sql.DB { return p.db }

// Shutdown asks the server to shut down cleanly and waits for the process to exit.
func (p *Private) Shutdown(ctx context.Context) error {
	if p.db != nil {
		_, _ = p.db.ExecContext(ctx, "SHUTDOWN")
		p.db.Close()
	}
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("%s shutdown failed (%v): %s", p.program, err, p.LogErrors())
		}
		return nil
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("%s did not shut down: %w", p.program, ctx.Err())
	}
}

func (p *Private) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.done <- nil
	}
}

// LogErrors returns the [ERROR] lines of the error log (or its tail), on one line.
func (p *Private) LogErrors() string {
	b, _ := os.ReadFile(p.ErrLog)
	var errs []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(l, []byte("[ERROR]")) {
			errs = append(errs, string(l))
		}
	}
	if len(errs) == 0 {
		lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
		for _, l := range lines[max(0, len(lines)-3):] {
			errs = append(errs, string(l))
		}
	}
	if len(errs) > 5 {
		errs = errs[len(errs)-5:]
	}
	return strings.Join(errs, " | ") + " (full log: " + p.ErrLog + ")"
}

// DatadirInUse reports whether a server holds the InnoDB lock on the datadir's ibdata1.
func DatadirInUse(datadir string) bool {
	f, err := os.OpenFile(filepath.Join(datadir, "ibdata1"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}

// OwnerName is the name of the user owning path ("" if unknown).
func OwnerName(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(st.Uid), 10))
	if err != nil {
		return ""
	}
	return u.Username
}
