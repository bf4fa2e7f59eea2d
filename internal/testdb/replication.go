package testdb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// CreateReplicationUser creates user@'%' and user@'127.0.0.1' with password
// on s and grants them REPLICATION SLAVE (on MySQL by mysql_native_password).
func CreateReplicationUser(t testing.TB, s *Server, user, password string) {
	t.Helper()
	if s.IsMySQL() {
		createReplicationUserMySQL(t, s, user, password)
		return
	}
	for _, host := range []string{"%", "127.0.0.1"} {
		s.Exec(t, "CREATE USER IF NOT EXISTS ?@? IDENTIFIED BY ?", user, host, password)
		s.Exec(t, "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO ?@?", user, host)
	}
}

// StartReplica points replica at primary over TCP with GTID replication from
// gtidPos (a @@gtid_binlog_pos value, "" for the start of the binlog) and
// starts the slave threads. The replica syncs its redo once a second rather than at
// every commit: it exists to be checked, and catching up on a long workload with an
// fsync per transaction took minutes on CI. On MySQL it uses GTID auto-positioning, and
// gtidPos is a @@GLOBAL.gtid_executed of the source (see startReplicaMySQL).
func StartReplica(t testing.TB, replica, primary *Server, gtidPos, user, password string) {
	t.Helper()
	if replica.IsMySQL() {
		startReplicaMySQL(t, replica, primary, gtidPos, user, password)
		return
	}
	replica.Exec(t, "STOP SLAVE")
	replica.Exec(t, "SET GLOBAL innodb_flush_log_at_trx_commit = 2")
	replica.Exec(t, "SET GLOBAL gtid_slave_pos = ?", strings.TrimSpace(gtidPos))
	cm, args := mariadb.ChangeMaster{Host: "127.0.0.1", Port: primary.Port, User: user, Password: password, UseGTID: "slave_pos", ConnectRetry: 1}.Prepared()
	replica.Exec(t, cm, args...)
	// The test servers have no TLS, and since 11.3 a replica asks for it by default.
	replica.Exec(t, "CHANGE MASTER TO MASTER_SSL=0")
	replica.Exec(t, "START SLAVE")
}

// WaitCaughtUp waits until replica has applied primary's current
// @@gtid_binlog_pos with both slave threads running, failing the test with the
// replication error if a thread stops or timeout passes. On MySQL it waits for the
// primary's @@GLOBAL.gtid_executed.
func WaitCaughtUp(t testing.TB, replica, primary *Server, timeout time.Duration) {
	t.Helper()
	if replica.IsMySQL() {
		waitCaughtUpMySQL(t, replica, primary, timeout)
		return
	}
	pos := primary.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos")
	deadline := time.Now().Add(timeout)
	for {
		st := slaveStatus(t, replica)
		if st["Slave_SQL_Running"] != "Yes" || st["Last_SQL_Error"] != "" {
			t.Fatalf("replica SQL thread stopped (running=%s): %s", st["Slave_SQL_Running"], st["Last_SQL_Error"])
		}
		done, err := queryString(context.Background(), replica.DB(t), "SELECT MASTER_GTID_WAIT(?, 0.5)", pos)
		if err != nil {
			t.Fatal(err)
		}
		if done == "0" && st["Slave_IO_Running"] == "Yes" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not reach %s within %v (at %s): IO running=%s, IO error %q, SQL error %q", pos, timeout,
				replica.QueryString(t, "SELECT @@GLOBAL.gtid_slave_pos"), st["Slave_IO_Running"], st["Last_IO_Error"], st["Last_SQL_Error"])
		}
	}
}

// slaveStatus returns SHOW SLAVE STATUS as column → value.
func slaveStatus(t testing.TB, s *Server) map[string]string {
	t.Helper()
	rows, err := queryMaps(s.DB(t), "SHOW SLAVE STATUS")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("SHOW SLAVE STATUS: %d rows; is replication configured? (see StartReplica)", len(rows))
	}
	return rows[0]
}

// GTIDForDomain returns the component of a GTID position ("0-1-55,7-1-1234")
// in domain, e.g. "7-1-1234", or "" if the position has none.
func GTIDForDomain(pos string, domain uint32) string {
	prefix := fmt.Sprintf("%d-", domain)
	for _, g := range strings.Split(pos, ",") {
		if g = strings.TrimSpace(g); strings.HasPrefix(g, prefix) {
			return g
		}
	}
	return ""
}
