package restore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/setting"
)

// checkKeys reads a page of a few tables per encryption key id on a restarted
// recovered server (an empty buffer pool, so the pages come from disk): recovery
// rebuilds from the redo the pages it touches without decrypting them, so a wrong
// key file can pass it and fail only when the restored server reads a table. A table
// that does not decrypt is an error naming the key id and the option. Pages written
// since the backup's checkpoint were rebuilt and re-encrypted with the key given, so
// only tables older than that prove the key; most of a production server's are.
func checkKeys(ctx context.Context, db *sql.DB, keyFile string, log *slog.Logger) error {
	rows, err := db.QueryContext(ctx, "SELECT NAME, CURRENT_KEY_ID FROM information_schema.INNODB_TABLESPACES_ENCRYPTION WHERE ENCRYPTION_SCHEME <> 0 ORDER BY SPACE")
	if err != nil {
		return fmt.Errorf("prepare: list encrypted tablespaces: %w", err)
	}
	byKey := map[int64][]string{}
	for rows.Next() {
		var name string
		var key int64
		if err := rows.Scan(&name, &key); err != nil {
			rows.Close()
			return fmt.Errorf("prepare: list encrypted tablespaces: %w", err)
		}
		if q := tableOf(name); q != "" && len(byKey[key]) < tablesPerKey {
			byKey[key] = append(byKey[key], q)
		}
	}
	rows.Close()
	n := 0
	for key, tables := range byKey {
		for _, table := range tables {
			var one int
			err := db.QueryRowContext(ctx, "SELECT 1 FROM "+table+" LIMIT 1").Scan(&one)
			if err != nil && err != sql.ErrNoRows {
				return setting.Errorf("the key file %s (%s) does not decrypt %s, encrypted with key id %d by file_key_management (%v): it is not the source's key file, or %s is wrong", keyFile, setting.KeyFile, table, key, err, setting.KeyPasswordFile)
			}
			n++
		}
	}
	log.Info("prepare: the key file decrypts the backup's tables", "key_ids", len(byKey), "tables_read", n)
	return nil
}

// tablesPerKey bounds the tables read per key id.
const tablesPerKey = 4

// tableOf turns a tablespace name ("db/t", "db/t#P#p0", with MariaDB's @XXXX
// filename encoding) into a quoted `db`.`t`, or "" if it cannot.
func tableOf(space string) string {
	db, t, ok := strings.Cut(space, "/")
	if !ok {
		return ""
	}
	t, _, _ = strings.Cut(t, "#")
	db, t = decodeName(db), decodeName(t)
	if db == "" || t == "" {
		return ""
	}
	return quote(db) + "." + quote(t)
}

// decodeName undoes the @XXXX (four hex digits, a code point) form of MariaDB's file
// name encoding; a name using another form gives "".
func decodeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '@' {
			b.WriteByte(s[i])
			continue
		}
		if i+5 > len(s) {
			return ""
		}
		r, err := strconv.ParseUint(s[i+1:i+5], 16, 32)
		if err != nil {
			return ""
		}
		b.WriteRune(rune(r))
		i += 4
	}
	return b.String()
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
