package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// BackupGrants are what a backup's user needs: BACKUP_ADMIN for LOCK INSTANCE FOR
// BACKUP and performance_schema.log_status, RELOAD for FLUSH ... (engine logs, tables
// with read lock), PROCESS for information_schema's InnoDB tables, REPLICATION CLIENT
// for the replica's status; and SELECT on performance_schema.log_status.
var BackupGrants = []string{"BACKUP_ADMIN", "RELOAD", "PROCESS", "REPLICATION CLIENT"}

// grantRe splits one line of SHOW GRANTS: the privileges and what they are on.
var grantRe = regexp.MustCompile(`^GRANT (.+) ON (\S+) TO `)

// CheckGrants refuses, with every missing grant named, a user that cannot take a
// backup.
func CheckGrants(ctx context.Context, db *sql.DB, user string) error {
	lines, err := names(ctx, db, "SHOW GRANTS")
	if err != nil {
		return fmt.Errorf("read grants: %w", err)
	}
	missing := missingGrants(lines)
	if len(missing) == 0 {
		return nil
	}
	// Marked as a refused connection, as MariaDB's missing privileges are (exit code 3).
	return mariadb.Unreachable(fmt.Errorf("user %q lacks %s: run GRANT %s ON *.* TO <user>; GRANT SELECT ON performance_schema.log_status TO <user>",
		user, strings.Join(missing, ", "), strings.Join(BackupGrants, ", ")))
}

// missingGrants is what of BackupGrants and SELECT on log_status the SHOW GRANTS lines
// do not give.
func missingGrants(lines []string) []string {
	global := map[string]bool{}
	logStatus := false
	for _, l := range lines {
		m := grantRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		on := strings.ReplaceAll(m[2], "`", "")
		for _, p := range strings.Split(m[1], ",") {
			p = strings.ToUpper(strings.TrimSpace(p))
			switch on {
			case "*.*":
				global[p] = true
			case "performance_schema.*", "performance_schema.log_status":
				logStatus = logStatus || p == "SELECT" || p == "ALL PRIVILEGES" || p == "ALL"
			}
		}
	}
	if global["ALL PRIVILEGES"] || global["ALL"] {
		return nil
	}
	var out []string
	for _, g := range BackupGrants {
		if !global[g] {
			out = append(out, g)
		}
	}
	if !logStatus && !global["SELECT"] {
		out = append(out, "SELECT on performance_schema.log_status")
	}
	return out
}
