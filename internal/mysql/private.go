package mysql

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// PrivateConfig describes a private, networkless mysqld run on a datadir: the
// recovery of a copy.
type PrivateConfig struct {
	Binary  string
	Datadir string
	RunDir  string   // holds the socket and pid file; must be short (socket path limit)
	Args    []string // server options (from the backup's settings)
	ErrLog  string   // error log; default mysqld.err in RunDir
}

// Private is a running private mysqld.
type Private struct {
	cfg    PrivateConfig
	cmd    *exec.Cmd
	done   chan error
	Socket string
	ErrLog string
	db     *sql.DB
}

// StartPrivate starts mysqld with no networking, no replica threads and no grant
// checks on a private socket, and waits until it accepts connections: its crash
// recovery has then run.
func StartPrivate(ctx context.Context, cfg PrivateConfig) (*Private, error) {
	p := &Private{cfg: cfg, Socket: filepath.Join(cfg.RunDir, "m.sock"), ErrLog: cfg.ErrLog}
	if p.ErrLog == "" {
		p.ErrLog = filepath.Join(cfg.RunDir, "mysqld.err")
	}
	args := append([]string{"--no-defaults"}, cfg.Args...)
	if base := Basedir(cfg.Binary); base != "" {
		args = append(args, "--basedir="+base, "--lc-messages-dir="+filepath.Join(base, "share"))
	}
	args = append(args, "--datadir="+cfg.Datadir, "--socket="+p.Socket, "--skip-networking",
		"--pid-file="+filepath.Join(cfg.RunDir, "m.pid"), "--log-error="+p.ErrLog,
		"--skip-replica-start", "--event-scheduler=OFF", "--skip-grant-tables", "--mysqlx=OFF",
		"--performance-schema=OFF", "--innodb-buffer-pool-load-at-startup=OFF",
		"--innodb-buffer-pool-dump-at-shutdown=OFF", "--secure-file-priv=", "--auto-generate-certs=OFF",
		"--sha256-password-auto-generate-rsa-keys=OFF", "--caching-sha2-password-auto-generate-rsa-keys=OFF")
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	p.cmd = exec.Command(cfg.Binary, args...)
	// Its own process group, killed with ferry: a ferry killed with SIGKILL leaves no
	// server running on the copy.
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
			return fmt.Errorf("mysqld exited during recovery (%v): %s", err, p.LogErrors())
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

// Shutdown stops the server cleanly (a slow shutdown: innodb_fast_shutdown=0, so the
// copy needs no recovery and no purge at its next start) and waits for it to exit.
func (p *Private) Shutdown(ctx context.Context) error {
	if p.db != nil {
		_, _ = p.db.ExecContext(ctx, "SET GLOBAL innodb_fast_shutdown=0")
		p.db.Close()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("mysqld shutdown failed (%v): %s", err, p.LogErrors())
		}
		return nil
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("mysqld did not shut down: %w", ctx.Err())
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
