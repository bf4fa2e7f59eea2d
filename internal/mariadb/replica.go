package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/go-sql-driver/mysql"

	"github.com/ferry-backup/ferry/internal/setting"
)

// ReplicaSource is one replication connection of a backed-up replica, read under
// BLOCK_COMMIT: where a new replica of the same source starts (xtrabackup_slave_info).
type ReplicaSource struct {
	Connection string `json:"connection,omitempty"` // multi-source connection name ("" the default one)
	Host       string `json:"host"`
	Port       int    `json:"port"`
	File       string `json:"file,omitempty"` // Relay_Master_Log_File: the source's binlog the SQL thread executes
	Pos        uint64 `json:"pos,omitempty"`  // Exec_Master_Log_Pos
	UsingGTID  string `json:"using_gtid,omitempty"`
}

// ReadReplicaSources reads every replication connection of the server (SHOW ALL SLAVES
// STATUS); none if it is not a replica. It needs the REPLICA MONITOR privilege.
func ReadReplicaSources(ctx context.Context, q Querier) ([]ReplicaSource, error) {
	rows, err := QueryMaps(ctx, q, "SHOW ALL SLAVES STATUS")
	if err != nil {
		if IsAccessDenied(err) {
			return nil, fmt.Errorf("%w: GRANT REPLICA MONITOR ON *.* TO the backup user to record where the replica is", err)
		}
		return nil, err
	}
	var out []ReplicaSource
	for _, r := range rows {
		s := ReplicaSource{Connection: r["Connection_name"], Host: r["Master_Host"], File: r["Relay_Master_Log_File"], UsingGTID: r["Using_Gtid"]}
		s.Port, _ = strconv.Atoi(r["Master_Port"])
		s.Pos, _ = strconv.ParseUint(r["Exec_Master_Log_Pos"], 10, 64)
		out = append(out, s)
	}
	return out, nil
}

// IsAccessDenied tells whether err is the server refusing a statement for a missing
// privilege (errors 1227 and 1142).
func IsAccessDenied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1227 || me.Number == 1142)
}

// SlaveInfo is xtrabackup_slave_info as mariadb-backup --slave-info writes it: the
// statements that make a server restored from the backup a replica of the backed-up
// replica's source. nil when the server was not a replica.
func SlaveInfo(c Coordinates) []byte {
	if len(c.Sources) == 0 {
		return nil
	}
	var b strings.Builder
	if c.GTIDSlavePos != "" {
		fmt.Fprintf(&b, "SET GLOBAL gtid_slave_pos = '%s';\n", c.GTIDSlavePos)
		for _, s := range c.Sources {
			// in mariadb-backup's own words, which scripts may look for
			b.WriteString(ChangeMaster{Connection: s.Connection}.head() + " master_use_gtid = slave_pos;\n")
		}
		return []byte(b.String())
	}
	for _, s := range c.Sources {
		b.WriteString(ChangeMaster{Connection: s.Connection, LogFile: s.File, LogPos: s.Pos}.SQL() + ";\n")
	}
	return []byte(b.String())
}

// SQLThreadPause is a replica's SQL thread stopped for the backup's locks
// (--safe-slave-backup), started again by Resume.
type SQLThreadPause struct {
	conn    *sql.Conn
	stopped bool
}

// PauseSQLThread stops the SQL thread of the default replication connection when it
// has no temporary tables open (they are not in the backup): while it has some, it is
// started again and retried every second until timeout. A server that is not a replica
// or whose SQL thread is not running is left alone.
func PauseSQLThread(ctx context.Context, conn *sql.Conn, timeout time.Duration) (*SQLThreadPause, error) {
	p := &SQLThreadPause{conn: conn}
	st, err := QueryMaps(ctx, conn, "SHOW SLAVE STATUS")
	if err != nil || len(st) == 0 || st[0]["Slave_SQL_Running"] != "Yes" {
		return p, err
	}
	open, err := retryWhileOpen(ctx, time.Second, timeout, p.tryStop)
	if open > 0 {
		return p, setting.Errorf("%s: the replica kept %d temporary tables open for %v: retry when its statements leave none open, or raise %s", setting.SafeSlaveBackup, open, timeout, setting.SafeSlaveBackupTimeout)
	}
	return p, err
}

// tempTablesOpen is a stop of the SQL thread undone: it had that many temporary
// tables open.
type tempTablesOpen int

func (n tempTablesOpen) Error() string { return fmt.Sprintf("%d temporary tables open", int(n)) }

// tryStop stops the SQL thread and starts it again if it has temporary tables open
// (tempTablesOpen); a failed statement is a permanent error.
func (p *SQLThreadPause) tryStop(ctx context.Context) error {
	if _, err := p.conn.ExecContext(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		return backoff.Permanent(setting.Errorf("%s: STOP SLAVE SQL_THREAD: %w", setting.SafeSlaveBackup, err))
	}
	p.stopped = true
	open, err := openTempTables(ctx, p.conn)
	if err != nil || open == 0 {
		return backoff.Permanent(err)
	}
	if err := p.Resume(ctx); err != nil {
		return backoff.Permanent(err)
	}
	return tempTablesOpen(open)
}

// retryWhileOpen runs try again after each wait of every while it finds temporary
// tables open, for up to timeout (one try when timeout is not positive). It returns how many were open when it
// gave up (0 otherwise), try's permanent error, or ctx's error.
func retryWhileOpen(ctx context.Context, every, timeout time.Duration, try func(context.Context) error) (int, error) {
	pol := backoff.Policy{Initial: every, Max: every, Multiplier: 1, Jitter: -1, MaxElapsed: timeout}
	if timeout <= 0 {
		pol.Attempts = 1
	}
	err := backoff.Retry(ctx, pol, try, nil, nil)
	var open tempTablesOpen
	switch {
	case err == nil || backoff.IsPermanent(err):
		return 0, err
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case errors.As(err, &open):
		return int(open), nil
	}
	return 0, err
}

func openTempTables(ctx context.Context, conn *sql.Conn) (int, error) {
	var name string
	var n int
	err := conn.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Slave_open_temp_tables'").Scan(&name, &n)
	if err != nil {
		return 0, setting.Errorf("%s: read Slave_open_temp_tables: %w", setting.SafeSlaveBackup, err)
	}
	return n, nil
}

// Stopped tells whether the SQL thread was stopped (and Resume will start it).
func (p *SQLThreadPause) Stopped() bool { return p != nil && p.stopped }

// Resume starts the SQL thread again if PauseSQLThread stopped it.
func (p *SQLThreadPause) Resume(ctx context.Context) error {
	if !p.Stopped() {
		return nil
	}
	if _, err := p.conn.ExecContext(ctx, "START SLAVE SQL_THREAD"); err != nil {
		return setting.Errorf("%s: START SLAVE SQL_THREAD (start it by hand): %w", setting.SafeSlaveBackup, err)
	}
	p.stopped = false
	return nil
}
