package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"
)

// ddlStable are the tables of schema `ddl` that always exist.
var ddlStable = []string{"t1", "t2", "t3"}

// ddlAlgorithms cycle through a table copy, an in-place rebuild and the default (instant).
var ddlAlgorithms = []string{", ALGORITHM=COPY", ", FORCE, ALGORITHM=INPLACE", ""}

// DDL runs a DDL loop in schema `ddl`: the stable tables t1..t3 get a column
// added and dropped back and forth (by copy, in-place rebuild or instantly)
// under concurrent DML, and transient tables go through CREATE, INSERT,
// ALTER, RENAME, TRUNCATE and DROP.
type DDL struct {
	db  *sql.DB
	ops atomic.Int64
}

// NewDDL (re)creates schema `ddl` with the stable tables on db, a MariaDB server: the
// loop and its checks are MariaDB's (ADD COLUMN IF NOT EXISTS, the INNODB_SYS_* tables,
// .frm files), and a MySQL server fails the test.
func NewDDL(t testing.TB, db *sql.DB) *DDL {
	t.Helper()
	if my, err := isMySQL(context.Background(), db); err != nil || my {
		t.Fatalf("ddl: the DDL workload runs on MariaDB only (MySQL: %v, %v)", my, err)
	}
	mustExec(t, db, "DROP DATABASE IF EXISTS ddl", "CREATE DATABASE ddl")
	for _, name := range ddlStable {
		mustExec(t, db, "CREATE TABLE ddl."+name+" (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(100) NOT NULL, KEY (v)) ENGINE=InnoDB",
			"INSERT INTO ddl."+name+" VALUES "+rowsOf(100, "(%[1]d, %[1]d, 's%[1]d')"))
	}
	return &DDL{db: db}
}

// Ops returns the number of statements the DDL loop and its DML writer completed.
func (d *DDL) Ops() int64 { return d.ops.Load() }

// Run runs the DDL loop and a DML writer on the stable tables until ctx is
// cancelled; it returns nil then, or the first error.
func (d *DDL) Run(ctx context.Context) error {
	g := new(errgroup.Group)
	g.Go(func() error { return d.loop(ctx, d.step) })
	g.Go(func() error { return d.loop(ctx, d.dml) })
	return g.Wait()
}

// loop calls step with n = 0, 1, ... until ctx is cancelled or it fails.
func (d *DDL) loop(ctx context.Context, step func(n int) error) error {
	for n := 0; ctx.Err() == nil; n++ {
		if err := step(n); err != nil {
			return fmt.Errorf("ddl after %d ops: %w", d.Ops(), err)
		}
	}
	return nil
}

// exec runs statements in order on the pool, retrying deadlocks.
func (d *DDL) exec(stmts ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	for _, q := range stmts {
		_, err := d.db.ExecContext(ctx, q)
		for retryable(err) {
			_, err = d.db.ExecContext(ctx, q)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		d.ops.Add(1)
	}
	return nil
}

// step alters one stable table and takes one transient table through its life.
func (d *DDL) step(n int) error {
	alg := ddlAlgorithms[(n/len(ddlStable))%len(ddlAlgorithms)]
	col := "ADD COLUMN IF NOT EXISTS extra INT NOT NULL DEFAULT 5"
	if (n/len(ddlStable))%2 == 1 {
		col = "DROP COLUMN IF EXISTS extra"
	}
	if err := d.exec("ALTER TABLE ddl." + ddlStable[n%len(ddlStable)] + " " + col + alg); err != nil {
		return err
	}
	x, r := fmt.Sprintf("ddl.x%d", n%4), fmt.Sprintf("ddl.r%d", n%4)
	stmts := []string{"DROP TABLE IF EXISTS " + x + ", " + r,
		"CREATE TABLE " + x + " (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL, s VARCHAR(100)) ENGINE=InnoDB",
		"INSERT INTO " + x + " (v, s) VALUES " + rowsOf(50, "(%[1]d, REPEAT('x', %[1]d))"),
		fmt.Sprintf("ALTER TABLE %s ADD COLUMN c INT NOT NULL DEFAULT %d%s", x, n, alg),
		"RENAME TABLE " + x + " TO " + r}
	if n%2 == 0 {
		stmts = append(stmts, "TRUNCATE TABLE "+r, "INSERT INTO "+r+" (v, s) VALUES (1, 'a'), (2, 'b')")
	}
	if n%5 == 4 {
		stmts = append(stmts, "DROP TABLE "+r)
	}
	return d.exec(stmts...)
}

// dml replaces and updates rows of a stable table (ids stay within 1..1000).
func (d *DDL) dml(n int) error {
	tbl := "ddl." + ddlStable[n%len(ddlStable)]
	id := 1 + rand.IntN(1000)
	return d.exec(fmt.Sprintf("REPLACE INTO %s (id, v, s) VALUES (%d, %d, 'r%d')", tbl, id, n, n),
		fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", tbl, 1+rand.IntN(100)))
}

// Check asserts on db that the stable tables exist, every table in schema
// `ddl` opens and reads fully and passes CHECK TABLE, InnoDB's dictionary
// agrees with the .frm files, and there are no orphan tablespaces or files.
func (d *DDL) Check(t testing.TB, db *sql.DB) {
	t.Helper()
	tables, err := queryMaps(db, "SELECT TABLE_NAME, ENGINE, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'ddl'")
	if err != nil {
		t.Fatalf("ddl: list tables: %v", err)
	}
	names := map[string]bool{}
	for _, tb := range tables {
		names[tb["TABLE_NAME"]] = true
		if tb["ENGINE"] == "" {
			t.Errorf("ddl.%s cannot be opened: %s", tb["TABLE_NAME"], tb["TABLE_COMMENT"])
			continue
		}
		if err := readTable(db, "ddl."+quoteIdent(tb["TABLE_NAME"])); err != nil {
			t.Error(err)
		}
	}
	for _, name := range ddlStable {
		if !names[name] {
			t.Errorf("ddl.%s is missing", name)
		}
	}
	checkTablespaces(t, db, names)
	checkColumns(t, db)
	checkFiles(t, db, names)
}

// readTable shows, counts, checksums (reading every column) and checks a table.
func readTable(db *sql.DB, name string) error {
	for _, q := range []string{"SHOW CREATE TABLE ", "SELECT COUNT(*) FROM ", "CHECKSUM TABLE "} {
		if _, err := queryMaps(db, q+name); err != nil {
			return err
		}
	}
	return checkTable(db, name)
}

// checkTablespaces asserts InnoDB's ddl/ tablespaces are exactly the tables.
func checkTablespaces(t testing.TB, db *sql.DB, tables map[string]bool) {
	t.Helper()
	spaces, err := queryStrings(db, "SELECT NAME FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME LIKE 'ddl/%'")
	if err != nil {
		t.Fatalf("ddl: list tablespaces: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range spaces {
		name := strings.TrimPrefix(s, "ddl/")
		seen[name] = true
		if !tables[name] {
			t.Errorf("ddl: orphan InnoDB tablespace %s has no table", s)
		}
	}
	for name := range tables {
		if !seen[name] {
			t.Errorf("ddl.%s has no InnoDB tablespace", name)
		}
	}
}

// checkColumns asserts InnoDB's dictionary has the columns the .frm files declare.
func checkColumns(t testing.TB, db *sql.DB) {
	t.Helper()
	bad, err := queryMaps(db, `SELECT f.TABLE_NAME, f.n AS frm, i.n AS innodb FROM
		(SELECT TABLE_NAME, COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'ddl' GROUP BY TABLE_NAME) f
		LEFT JOIN (SELECT SUBSTRING(t.NAME, 5) AS TABLE_NAME, COUNT(*) AS n FROM information_schema.INNODB_SYS_TABLES t
		JOIN information_schema.INNODB_SYS_COLUMNS c ON c.TABLE_ID = t.TABLE_ID WHERE t.NAME LIKE 'ddl/%' GROUP BY t.NAME) i
		ON i.TABLE_NAME = f.TABLE_NAME WHERE i.n IS NULL OR i.n <> f.n`)
	if err != nil {
		t.Fatalf("ddl: compare columns: %v", err)
	}
	for _, r := range bad {
		t.Errorf("ddl.%s: .frm has %s columns, InnoDB dictionary %q", r["TABLE_NAME"], r["frm"], r["innodb"])
	}
}

// checkFiles asserts every file in the datadir's ddl/ belongs to a table.
func checkFiles(t testing.TB, db *sql.DB, tables map[string]bool) {
	t.Helper()
	datadir, err := queryString(context.Background(), db, "SELECT @@datadir")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(datadir, "ddl")
	files, err := listDir(dir)
	if err != nil {
		t.Fatalf("ddl: %v", err)
	}
	for _, f := range files {
		base, ext, _ := strings.Cut(f, ".")
		if f != "db.opt" && (!tables[base] || (ext != "frm" && ext != "ibd")) {
			t.Errorf("ddl: orphan file %s", filepath.Join(dir, f))
		}
	}
}

// listDir returns the names in dir.
func listDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// rowsOf renders n VALUES tuples from format, given 1..n.
func rowsOf(n int, format string) string {
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf(format, i+1)
	}
	return strings.Join(rows, ",")
}
