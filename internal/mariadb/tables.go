package mariadb

import (
	"context"
	"fmt"
	"strings"
)

// Table is one table of a server as its data dictionary lists it: what a backup
// records at its end point, so that a restore drill can tell a table the restored copy
// lost (its definition or its data file).
type Table struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	Engine string `json:"engine,omitempty"` // "" if the server could not open the table's definition
}

// String is the table's name as schema.table.
func (t Table) String() string { return t.Schema + "." + t.Name }

// Quoted is the table's name quoted for a statement: `schema`.`table`.
func (t Table) Quoted() string { return QuoteName(t.Schema) + "." + QuoteName(t.Name) }

// QuoteName quotes an identifier with backticks, doubling any inside it.
func QuoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// tablesQuery lists the base tables (also system-versioned ones and sequences) of
// every schema but the two virtual ones. ENGINE makes the server read each table's
// definition (.frm), not its data: the cost is one small file per table.
const tablesQuery = `SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(ENGINE, '') FROM information_schema.TABLES
 WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED', 'SEQUENCE')
 AND TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema')
 ORDER BY TABLE_SCHEMA, TABLE_NAME`

// ListTables lists the server's tables (see Table), ordered by schema and name.
func ListTables(ctx context.Context, q Querier) ([]Table, error) {
	rows, err := q.QueryContext(ctx, tablesQuery)
	if err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	defer rows.Close()
	var out []Table
	for rows.Next() {
		var t Table
		if err := rows.Scan(&t.Schema, &t.Name, &t.Engine); err != nil {
			return nil, fmt.Errorf("list the tables: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	return out, nil
}

// Tables lists the server's tables on the locking connection: under BLOCK_DDL no
// table is created, dropped or renamed until the sequence ends, so the list is the
// one of the backup's end point.
func (l *BackupLock) Tables(ctx context.Context) ([]Table, error) { return ListTables(ctx, l.conn) }
