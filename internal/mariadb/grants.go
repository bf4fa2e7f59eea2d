package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// BackupPrivileges are the global privileges a backup needs: RELOAD for BACKUP STAGE
// and FLUSH ENGINE LOGS, PROCESS for InnoDB status, BINLOG MONITOR for SHOW MASTER STATUS.
var BackupPrivileges = []string{"RELOAD", "PROCESS", "BINLOG MONITOR"}

// CheckPrivileges returns an error naming every missing privilege from want.
func CheckPrivileges(ctx context.Context, db *sql.DB, user string, want []string) error {
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return fmt.Errorf("read grants: %w", err)
	}
	defer rows.Close()
	var global []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return fmt.Errorf("read grants: %w", err)
		}
		if strings.Contains(g, " ON *.* ") {
			global = append(global, strings.ToUpper(g))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read grants: %w", err)
	}
	missing := missingPrivileges(global, want)
	if len(missing) > 0 {
		msg := fmt.Sprintf("user %q lacks privileges %s: run GRANT %s ON *.* TO <user>",
			user, strings.Join(missing, ", "), strings.Join(want, ", "))
		return &connError{msg, []error{ErrConnect}} // refused by the server, for the exit code
	}
	return nil
}

func missingPrivileges(global, want []string) []string {
	all := strings.Join(global, "\n")
	if strings.Contains(all, "GRANT ALL PRIVILEGES ON *.*") {
		return nil
	}
	var missing []string
	for _, p := range want {
		if !strings.Contains(all, p) {
			missing = append(missing, p)
		}
	}
	return missing
}
