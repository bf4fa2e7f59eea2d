package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// Source is where a new replica replicates from.
type Source struct {
	Host, User, Password string
	Port                 int
}

var seriesRe = regexp.MustCompile(`^(\d+)\.(\d+)`)

// ReplicaSetup is the statements that make a server restored from a backup of server
// version a replica of src from the backup's gtid_executed, in that version's words:
// the binlog and GTID state reset (RESET MASTER before 8.2, RESET BINARY LOGS AND GTIDS
// from it), gtid_purged set to the backup's GTIDs, and CHANGE REPLICATION SOURCE TO
// with auto-position (8.0.23+; CHANGE MASTER is gone in 8.4).
func ReplicaSetup(version, gtid string, src Source) []string {
	reset := "RESET MASTER;"
	if m := seriesRe.FindStringSubmatch(version); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		if major > 8 || (major == 8 && minor >= 2) {
			reset = "RESET BINARY LOGS AND GTIDS;"
		}
	}
	return []string{
		reset,
		fmt.Sprintf("SET GLOBAL gtid_purged = %s;", quote(gtid)),
		fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST=%s, SOURCE_PORT=%d, SOURCE_USER=%s, SOURCE_PASSWORD=%s, SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1;",
			quote(src.Host), src.Port, quote(src.User), quote(src.Password)),
		"START REPLICA;",
	}
}

// quote is s as an SQL string literal.
func quote(s string) string { return mariadb.QuoteString(s) }

// StartReplica makes the server db reaches (a new copy of a backup of a server of
// version) a replica of src from gtid, with ReplicaSetup's statements, and waits until
// both replication threads run without error.
func StartReplica(ctx context.Context, db *sql.DB, version, gtid string, src Source, timeout time.Duration) error {
	reset := ReplicaSetup(version, gtid, src)[0]
	stmts := []struct {
		q    string
		args []any
	}{
		{"STOP REPLICA", nil},
		{strings.TrimSuffix(reset, ";"), nil},
		{"SET GLOBAL gtid_purged = ?", []any{gtid}},
		{"CHANGE REPLICATION SOURCE TO SOURCE_HOST=?, SOURCE_PORT=?, SOURCE_USER=?, SOURCE_PASSWORD=?, SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1, SOURCE_CONNECT_RETRY=5",
			[]any{src.Host, src.Port, src.User, src.Password}},
		{"START REPLICA", nil},
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s.q, s.args...); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(strings.Fields(s.q)[:2], " "), err)
		}
	}
	return waitReplicaRunning(ctx, db, timeout)
}

func waitReplicaRunning(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		rows, err := mariadb.QueryMaps(ctx, db, "SHOW REPLICA STATUS")
		if err != nil {
			return err
		}
		st := map[string]string{}
		if len(rows) > 0 {
			st = rows[0]
		}
		switch {
		case st["Last_IO_Error"] != "":
			return fmt.Errorf("the replica cannot read from the source: %s", st["Last_IO_Error"])
		case st["Last_SQL_Error"] != "":
			return fmt.Errorf("the replica failed to apply an event: %s", st["Last_SQL_Error"])
		case st["Replica_IO_Running"] == "Yes" && st["Replica_SQL_Running"] == "Yes":
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replication not running after %v (IO thread %s, SQL thread %s)", timeout, st["Replica_IO_Running"], st["Replica_SQL_Running"])
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
