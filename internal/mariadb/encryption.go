package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// FileKeyManagement is the key management plugin MariaDB ships that ferry can load for
// prepare: its keys are in a file the restore host can be given.
const FileKeyManagement = "file_key_management"

// readKeyPlugin returns the active encryption (key management) plugin, "" if none.
func readKeyPlugin(ctx context.Context, db *sql.DB) (string, error) {
	var name string
	err := db.QueryRowContext(ctx, "SELECT PLUGIN_NAME FROM information_schema.PLUGINS WHERE PLUGIN_TYPE = 'ENCRYPTION' AND PLUGIN_STATUS = 'ACTIVE' LIMIT 1").Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the server's encryption plugin: %w", err)
	}
	return strings.ToLower(name), nil
}

// AtRest says how the server encrypts data at rest, for logs: "none", or the key
// plugin and what it encrypts. It is the server's own encryption, not the backup's.
func (info Info) AtRest() string {
	if info.KeyPlugin == "" {
		return "none"
	}
	var what []string
	for _, v := range []struct{ name, what string }{
		{"innodb_encrypt_tables", "tables"}, {"innodb_encrypt_log", "redo"}, {"aria_encrypt_tables", "aria"}, {"encrypt_tmp_files", "tmp"},
	} {
		if on(info.Vars[v.name]) {
			what = append(what, v.what)
		}
	}
	if len(what) == 0 {
		what = append(what, "keys loaded, tables by ENCRYPTED=YES")
	}
	return info.KeyPlugin + " (" + strings.Join(what, ", ") + ")"
}

func on(v string) bool {
	switch strings.ToUpper(v) {
	case "ON", "1", "FORCE", "YES":
		return true
	}
	return false
}

// checkEncryption refuses, before anything is copied, a server whose encryption at
// rest ferry cannot carry to a restorable backup.
func (info Info) checkEncryption() error {
	if info.KeyPlugin != "" && info.KeyPlugin != FileKeyManagement {
		return fmt.Errorf("the server's encryption keys come from the %s plugin, which ferry cannot load to prepare a backup: ferry supports encryption at rest with %s only", info.KeyPlugin, FileKeyManagement)
	}
	return nil
}

// EncryptsLog says whether the server encrypts its redo log (innodb_encrypt_log=ON).
func (info Info) EncryptsLog() bool { return on(info.Vars["innodb_encrypt_log"]) }
