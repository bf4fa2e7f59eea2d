package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"
)

// mixTables are the tables of schema `mix` on MariaDB, name → {engine, table options}.
var mixTables = map[string][2]string{
	"aria_tx":   {"Aria", "TRANSACTIONAL=1"},
	"aria_ntx":  {"Aria", "TRANSACTIONAL=0"},
	"myisam":    {"MyISAM", ""},
	"innodb_pc": {"InnoDB", "PAGE_COMPRESSED=1"},
}

// mixTablesMySQL are the tables of schema `mix` on MySQL, which has no Aria: MyISAM and
// InnoDB's two compressions (zlib pages in a ROW_FORMAT=COMPRESSED table, page
// compression with punched holes).
var mixTablesMySQL = map[string][2]string{
	"myisam":     {"MyISAM", ""},
	"innodb_zip": {"InnoDB", "ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"},
	"innodb_pc":  {"InnoDB", "COMPRESSION='zlib'"},
}

// mixMaxRows caps each mix table; past it the writer only updates.
const mixMaxRows = 2000

// Mix writes to non-InnoDB (Aria, Aria non-transactional, MyISAM) and
// page-compressed InnoDB tables in schema `mix` (on MySQL mixTablesMySQL), one
// connection per table. Every row has chk = CRC32(CONCAT(a, ':', b)), written in the
// same statement.
type Mix struct {
	db     *sql.DB
	tables map[string][2]string // mixTables or mixTablesMySQL
	ops    atomic.Int64
}

// NewMix (re)creates schema `mix` on db, a MariaDB or MySQL server.
func NewMix(t testing.TB, db *sql.DB) *Mix {
	t.Helper()
	m := &Mix{db: db, tables: mixTables}
	if my, err := isMySQL(context.Background(), db); err != nil {
		t.Fatalf("mix: %v", err)
	} else if my {
		m.tables = mixTablesMySQL
	}
	mustExec(t, db, "DROP DATABASE IF EXISTS mix", "CREATE DATABASE mix")
	for name, eo := range m.tables {
		mustExec(t, db, fmt.Sprintf("CREATE TABLE mix.%s (id INT AUTO_INCREMENT PRIMARY KEY, "+
			"a BIGINT NOT NULL, b VARCHAR(200) NOT NULL, chk INT UNSIGNED NOT NULL) ENGINE=%s %s", name, eo[0], eo[1]))
	}
	return m
}

// Ops returns the number of statements the writers completed.
func (m *Mix) Ops() int64 { return m.ops.Load() }

// Run writes to every mix table concurrently until ctx is cancelled; it
// returns nil then, or the first error.
func (m *Mix) Run(ctx context.Context) error {
	g := new(errgroup.Group)
	for name := range m.tables {
		g.Go(func() error { return m.writer(ctx, name) })
	}
	return g.Wait()
}

// writer inserts and updates rows of one table on its own connection.
func (m *Mix) writer(ctx context.Context, table string) error {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return ctxErr(ctx, err)
	}
	defer conn.Close()
	rows := 0
	for ctx.Err() == nil {
		if err := m.step(conn, table, &rows); err != nil {
			return fmt.Errorf("mix.%s after %d ops: %w", table, m.Ops(), err)
		}
	}
	return nil
}

// step inserts a row (below mixMaxRows) and updates a random one.
func (m *Mix) step(conn *sql.Conn, table string, rows *int) error {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	a, b := rand.Int64N(1<<40), fmt.Sprintf("row-%x-%s", rand.Uint64(), table)
	if *rows < mixMaxRows {
		q := "INSERT INTO mix." + table + " (a, b, chk) VALUES (?, ?, CRC32(CONCAT(?, ':', ?)))"
		if _, err := conn.ExecContext(ctx, q, a, b, a, b); err != nil {
			return err
		}
		*rows++
		m.ops.Add(1)
	}
	q := "UPDATE mix." + table + " SET a = a + 1, b = CONCAT(LEFT(b, 150), '+'), chk = CRC32(CONCAT(a, ':', b)) WHERE id = ?"
	if _, err := conn.ExecContext(ctx, q, 1+rand.IntN(max(*rows, 1))); err != nil {
		return err
	}
	m.ops.Add(1)
	return nil
}

// Check asserts on db that every mix table exists with its engine, passes
// CHECK TABLE ... EXTENDED, and that every row's chk matches its columns.
func (m *Mix) Check(t testing.TB, db *sql.DB) {
	t.Helper()
	for name, eo := range m.tables {
		engine, err := queryString(context.Background(), db,
			"SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mix' AND TABLE_NAME = ?", name)
		if err != nil {
			t.Errorf("mix.%s: %v", name, err)
			continue
		}
		if engine != eo[0] {
			t.Errorf("mix.%s: engine %s, want %s", name, engine, eo[0])
		}
		if err := checkTable(db, "mix."+name); err != nil {
			t.Error(err)
		}
		var bad, n int64
		err = db.QueryRow("SELECT COALESCE(SUM(chk <> CRC32(CONCAT(a, ':', b))), 0), COUNT(*) FROM mix."+name).Scan(&bad, &n)
		if err != nil || bad != 0 {
			t.Errorf("mix.%s: %d of %d rows fail their checksum (err %v)", name, bad, n, err)
		}
	}
}
