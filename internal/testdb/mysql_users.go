package testdb

import (
	"strings"
	"testing"
)

// MySQLBackupGrants are the global privileges MySQLBackupUser grants the backup user on
// MySQL, the one list to edit when ferry needs more: BACKUP_ADMIN for LOCK INSTANCE FOR
// BACKUP and performance_schema.log_status, RELOAD for FLUSH, PROCESS for the InnoDB
// tables of information_schema, REPLICATION CLIENT for the binlog and replica status,
// LOCK TABLES and SELECT for the non-InnoDB tables.
var MySQLBackupGrants = []string{"BACKUP_ADMIN", "RELOAD", "PROCESS", "REPLICATION CLIENT", "LOCK TABLES", "SELECT"}

// MySQLBackupUser creates user@'%' on the MySQL server s with password, authenticated
// by mysql_native_password (ferry connects over TCP without TLS, where
// caching_sha2_password would need TLS or the server's RSA key), and grants it
// MySQLBackupGrants and SELECT on performance_schema.
func MySQLBackupUser(t testing.TB, s *Server, user, password string) {
	t.Helper()
	createNativeUser(t, s, user, "%", password)
	s.Exec(t, "GRANT "+strings.Join(MySQLBackupGrants, ", ")+" ON *.* TO ?@'%'", user)
	s.Exec(t, "GRANT SELECT ON performance_schema.* TO ?@'%'", user)
}

// createNativeUser creates user@host with password by mysql_native_password.
func createNativeUser(t testing.TB, s *Server, user, host, password string) {
	t.Helper()
	s.Exec(t, "CREATE USER IF NOT EXISTS ?@? IDENTIFIED WITH mysql_native_password BY ?", user, host, password)
}

// createReplicationUserMySQL is CreateReplicationUser on MySQL: the users authenticate
// by mysql_native_password, so a replica needs neither TLS nor the source's RSA key.
func createReplicationUserMySQL(t testing.TB, s *Server, user, password string) {
	t.Helper()
	for _, host := range []string{"%", "127.0.0.1"} {
		createNativeUser(t, s, user, host, password)
		s.Exec(t, "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO ?@?", user, host)
	}
}
