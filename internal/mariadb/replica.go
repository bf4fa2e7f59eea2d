package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
			fmt.Fprintf(&b, "CHANGE MASTER %sTO master_use_gtid = slave_pos;\n", connName(s.Connection))
		}
		return []byte(b.String())
	}
	for _, s := range c.Sources {
		fmt.Fprintf(&b, "CHANGE MASTER %sTO MASTER_LOG_FILE='%s', MASTER_LOG_POS=%d;\n", connName(s.Connection), s.File, s.Pos)
	}
	return []byte(b.String())
}

func connName(n string) string {
	if n == "" {
		return ""
	}
	return "'" + strings.ReplaceAll(n, "'", "''") + "' "
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
	deadline := time.Now().Add(timeout)
	for {
		if _, err := conn.ExecContext(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
			return p, setting.Errorf("%s: STOP SLAVE SQL_THREAD: %w", setting.SafeSlaveBackup, err)
		}
		p.stopped = true
		open, err := openTempTables(ctx, conn)
		if err != nil || open == 0 {
			return p, err
		}
		if err := p.Resume(ctx); err != nil {
			return p, err
		}
		if time.Now().After(deadline) {
			return p, setting.Errorf("%s: the replica kept %d temporary tables open for %v: retry when its statements leave none open, or raise %s", setting.SafeSlaveBackup, open, timeout, setting.SafeSlaveBackupTimeout)
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(time.Second):
		}
	}
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
