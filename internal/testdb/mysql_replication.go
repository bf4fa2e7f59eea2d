package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startReplicaMySQL is StartReplica on MySQL: GTID auto-positioning from the replica's
// own gtid_executed, which gtidPos (a @@GLOBAL.gtid_executed of the source, "" to keep
// the replica's) replaces through RESET MASTER and gtid_purged, as a replica made from
// a backup is started.
func startReplicaMySQL(t testing.TB, replica, primary *Server, gtidPos, user, password string) {
	t.Helper()
	replica.Exec(t, "STOP REPLICA")
	replica.Exec(t, "SET GLOBAL innodb_flush_log_at_trx_commit = 2")
	if pos := strings.TrimSpace(gtidPos); pos != "" {
		replica.Exec(t, "RESET MASTER")
		replica.Exec(t, "SET GLOBAL gtid_purged = ?", pos)
	}
	// SOURCE_SSL=0: the harness's servers are reached without TLS; GET_SOURCE_PUBLIC_KEY
	// lets a caching_sha2_password user in all the same. The retry is 60 s by default.
	replica.Exec(t, "CHANGE REPLICATION SOURCE TO SOURCE_HOST = '127.0.0.1', SOURCE_PORT = ?, SOURCE_USER = ?, "+
		"SOURCE_PASSWORD = ?, SOURCE_AUTO_POSITION = 1, SOURCE_SSL = 0, GET_SOURCE_PUBLIC_KEY = 1, SOURCE_CONNECT_RETRY = 1, SOURCE_HEARTBEAT_PERIOD = 1",
		primary.Port, user, password)
	replica.Exec(t, "START REPLICA")
}

// waitCaughtUpMySQL is WaitCaughtUp on MySQL: until the replica's gtid_executed holds the
// source's, with both replication threads running.
func waitCaughtUpMySQL(t testing.TB, replica, primary *Server, timeout time.Duration) {
	t.Helper()
	pos := primary.QueryString(t, "SELECT @@GLOBAL.gtid_executed")
	deadline := time.Now().Add(timeout)
	for {
		st := replicaStatus(t, replica)
		if st["Replica_SQL_Running"] != "Yes" || st["Last_SQL_Error"] != "" {
			t.Fatalf("replica SQL thread stopped (running=%s): %s", st["Replica_SQL_Running"], st["Last_SQL_Error"])
		}
		timedOut, err := queryString(context.Background(), replica.DB(t), "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, 0.5)", pos)
		if err != nil {
			t.Fatal(err)
		}
		if timedOut == "0" && st["Replica_IO_Running"] == "Yes" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not reach %s within %v (at %s, received %s): IO running=%s, IO error %q, SQL error %q",
				pos, timeout, replica.QueryString(t, "SELECT @@GLOBAL.gtid_executed"), st["Retrieved_Gtid_Set"],
				st["Replica_IO_Running"], st["Last_IO_Error"], st["Last_SQL_Error"])
		}
	}
}

// replicaStatus returns SHOW REPLICA STATUS as column → value.
func replicaStatus(t testing.TB, s *Server) map[string]string {
	t.Helper()
	rows, err := queryMaps(s.DB(t), "SHOW REPLICA STATUS")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("SHOW REPLICA STATUS: %d rows; is replication configured? (see StartReplica)", len(rows))
	}
	return rows[0]
}

// GTIDSetLast returns the highest transaction number of source uuid in a MySQL GTID set
// such as @@GLOBAL.gtid_executed ("3E11FA47-...:1-5:7,\nbankuuid:1-42" gives 42 for
// bankuuid), or 0 if the set has none. UUIDs compare case-insensitively.
func GTIDSetLast(set, uuid string) int64 {
	var last int64
	for _, iv := range gtidIntervals(set, uuid) {
		last = max(last, iv[1])
	}
	return last
}

// gtidIntervals returns uuid's intervals [first, last] in a MySQL GTID set, in the
// set's order. Parts that are not intervals (the tags of 8.4's tagged GTIDs) are left
// out.
func gtidIntervals(set, uuid string) [][2]int64 {
	var out [][2]int64
	for _, member := range strings.Split(set, ",") {
		parts := strings.Split(strings.TrimSpace(member), ":")
		if !strings.EqualFold(parts[0], uuid) {
			continue
		}
		for _, p := range parts[1:] {
			lo, hi, isRange := strings.Cut(p, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 == nil && err2 == nil {
				out = append(out, [2]int64{a, b})
			}
		}
	}
	return out
}

// formatIntervals renders intervals as a GTID set does ("1-5:7").
func formatIntervals(ivs [][2]int64) string {
	var parts []string
	for _, iv := range ivs {
		if iv[0] == iv[1] {
			parts = append(parts, fmt.Sprint(iv[0]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", iv[0], iv[1]))
		}
	}
	return strings.Join(parts, ":")
}

// endDumpThreads ends the binlog dump threads of a MySQL source about to be shut down:
// mysqld 8.0.31 given SIGTERM while one runs sleeps 8 s in its shutdown (its
// close_connections waits for every session, the dump thread included, to end before
// it kills the dump threads). offline_mode (not persisted: off again after a restart)
// keeps the replicas' users, which lack CONNECTION_ADMIN, from reconnecting meanwhile.
// Best effort: what fails here is for the shutdown to report.
func (s *Server) endDumpThreads() {
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return
	}
	defer db.Close()
	q := "SELECT ID FROM performance_schema.processlist WHERE COMMAND LIKE 'Binlog Dump%'"
	ids, err := queryStrings(db, q)
	if err != nil || len(ids) == 0 {
		return
	}
	db.Exec("SET GLOBAL offline_mode = ON")
	for deadline := time.Now().Add(2 * time.Second); err == nil && len(ids) > 0 && time.Now().Before(deadline); {
		for _, id := range ids {
			db.Exec("KILL " + id)
		}
		time.Sleep(20 * time.Millisecond)
		ids, err = queryStrings(db, q)
	}
}
