package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Server is a mariadbd started as the host's server (it outlives ferry), as opposed to
// the private one prepare runs.
type Server struct {
	Pid     int
	Socket  string
	Port    int
	LogPath string // where its stderr goes
	exited  chan struct{}
}

// ServerOptions reads the options mariadbd would use from defaultsFile ("" for the
// host's usual my.cnf files).
func ServerOptions(ctx context.Context, bin, defaultsFile string) (map[string]string, error) {
	args := []string{"--print-defaults"}
	if defaultsFile != "" {
		args = append([]string{"--defaults-file=" + defaultsFile}, args...)
	}
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return nil, fmt.Errorf("read the server's options (%s --print-defaults): %w", bin, err)
	}
	opts := map[string]string{}
	for _, f := range strings.Fields(string(out)) {
		k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		opts[strings.ReplaceAll(k, "_", "-")] = v
	}
	return opts, nil
}

// StartServer starts bin on datadir with defaultsFile and the extra options (the
// datadir's layout) in its own session (it keeps running when ferry exits) and waits
// until conn reaches it, it exits, or timeout.
func StartServer(ctx context.Context, bin, defaultsFile, datadir string, extra []string, conn ConnConfig, timeout time.Duration) (*Server, error) {
	var args []string
	if defaultsFile != "" {
		args = append(args, "--defaults-file="+defaultsFile)
	}
	args = append(append(args, "--datadir="+datadir), extra...)
	logPath := filepath.Join(datadir, "ferry-start.log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("start mariadbd: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Pid: cmd.Process.Pid, Socket: conn.Socket, Port: conn.Port, LogPath: logPath, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }()
	return s, s.waitReady(ctx, conn, timeout)
}

func (s *Server) waitReady(ctx context.Context, conn ConnConfig, timeout time.Duration) error {
	db, err := sql.Open("mysql", conn.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(timeout)
	for {
		if err = db.PingContext(ctx); err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return errors.New("mariadbd exited during startup")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd not accepting connections after %v: %w", timeout, err)
		}
	}
}

// Stop shuts the server down with SIGTERM and waits for it to exit (SIGKILL after
// timeout).
func (s *Server) Stop(timeout time.Duration) {
	syscall.Kill(s.Pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(timeout):
		syscall.Kill(s.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// Replica is how a server replicates from its primary.
type Replica struct {
	Host     string
	Port     int
	User     string
	Password string
	GTID     string // gtid_slave_pos to start from
}

// StartReplica makes db a replica from r.GTID and waits until both replication threads
// run without error.
func StartReplica(ctx context.Context, db *sql.DB, r Replica, timeout time.Duration) error {
	cm, cmArgs := ChangeMaster{Host: r.Host, Port: r.Port, User: r.User, Password: r.Password, UseGTID: "slave_pos", ConnectRetry: 5}.Prepared()
	stmts := []struct {
		q    string
		args []any
	}{
		{"STOP SLAVE", nil},
		{"SET GLOBAL gtid_slave_pos = ?", []any{r.GTID}},
		{cm, cmArgs},
		{"START SLAVE", nil},
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s.q, s.args...); err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(s.q)[0]+" "+strings.Fields(s.q)[1], err)
		}
	}
	return waitReplicaRunning(ctx, db, timeout)
}

func waitReplicaRunning(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, err := SlaveStatus(ctx, db)
		if err != nil {
			return err
		}
		switch {
		case st["Last_IO_Error"] != "":
			return fmt.Errorf("the replica cannot read from the primary: %s", st["Last_IO_Error"])
		case st["Last_SQL_Error"] != "":
			return fmt.Errorf("the replica failed to apply an event: %s", st["Last_SQL_Error"])
		case st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes":
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replication not running after %v (IO thread %s, SQL thread %s)", timeout, st["Slave_IO_Running"], st["Slave_SQL_Running"])
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// SlaveStatus returns SHOW SLAVE STATUS as column → value (empty when not a replica).
func SlaveStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := QueryMaps(ctx, db, "SHOW SLAVE STATUS")
	if err != nil || len(rows) == 0 {
		return map[string]string{}, err
	}
	return rows[0], nil
}
