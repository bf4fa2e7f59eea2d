package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/go-sql-driver/mysql"
)

// DSN returns a go-sql-driver DSN for root over the unix socket, selecting db
// ("" for none), with multiStatements and interpolateParams on.
func (s *Server) DSN(db string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "unix", s.Socket, db
	c.MultiStatements, c.InterpolateParams = true, true
	return c.FormatDSN()
}

// DB returns a cached connection pool for root over the socket. Stop and Kill
// close it; call DB again after Restart.
func (s *Server) DB(t testing.TB) *sql.DB {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		db, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatalf("open %s: %v", s.Socket, err)
		}
		s.db = db
	}
	return s.db
}

// closeDB closes and forgets the cached pool.
func (s *Server) closeDB() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil {
		s.db.Close()
		s.db = nil
	}
}

// Exec runs a statement (or several) as root and fails the test on error.
func (s *Server) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := s.DB(t).Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// QueryString returns the first column of the first row of q ("" for NULL),
// failing the test on error or no rows.
func (s *Server) QueryString(t testing.TB, q string, args ...any) string {
	t.Helper()
	v, err := queryString(context.Background(), s.DB(t), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Version returns the server's VERSION(), e.g. "10.11.19-MariaDB-0+deb12u1".
func (s *Server) Version(t testing.TB) string {
	t.Helper()
	return s.QueryString(t, "SELECT VERSION()")
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// queryString returns the first column of the first row ("" for NULL).
func queryString(ctx context.Context, db querier, q string, args ...any) (string, error) {
	var v sql.NullString
	if err := db.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
		return "", fmt.Errorf("%s: %w", q, err)
	}
	return v.String, nil
}

// queryMaps returns every row of q as column name → value ("" for NULL).
func queryMaps(db querier, q string, args ...any) ([]map[string]string, error) {
	return mariadb.QueryMaps(context.Background(), db, q, args...)
}

// queryStrings returns the first column of every row of q.
func queryStrings(db querier, q string, args ...any) ([]string, error) {
	rows, err := queryMaps(db, q, args...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		for _, v := range r {
			out = append(out, v)
		}
	}
	return out, nil
}

// systemSchemas are left out when Checksums is given no schemas.
const systemSchemas = "'mysql','information_schema','performance_schema','sys'"

// Checksums returns CHECKSUM TABLE ... EXTENDED of every base table of the
// given schemas (all user schemas if none), keyed "schema.table".
func Checksums(t testing.TB, db *sql.DB, schemas ...string) map[string]string {
	t.Helper()
	q := "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND "
	args := []any{}
	if len(schemas) == 0 {
		q += "TABLE_SCHEMA NOT IN (" + systemSchemas + ")"
	} else {
		q += "TABLE_SCHEMA IN (?" + strings.Repeat(",?", len(schemas)-1) + ")"
		for _, s := range schemas {
			args = append(args, s)
		}
	}
	tables, err := queryStrings(db, q, args...)
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	sums := make(map[string]string, len(tables))
	for _, name := range tables {
		schema, table, _ := strings.Cut(name, ".")
		var tn string
		var sum sql.NullString
		q := fmt.Sprintf("CHECKSUM TABLE %s.%s EXTENDED", quoteIdent(schema), quoteIdent(table))
		if err := db.QueryRow(q).Scan(&tn, &sum); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		sums[name] = sum.String
		if !sum.Valid {
			sums[name] = "NULL"
		}
	}
	return sums
}

// quoteIdent quotes a MariaDB identifier with backticks.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// checkTable runs CHECK TABLE name EXTENDED and returns an error unless it reports OK.
func checkTable(db querier, name string) error {
	rows, err := queryMaps(db, "CHECK TABLE "+name+" EXTENDED")
	if err != nil {
		return err
	}
	var msgs []string
	ok := false
	for _, r := range rows {
		msgs = append(msgs, r["Msg_type"]+": "+r["Msg_text"])
		if r["Msg_type"] == "error" {
			ok = false
			break
		}
		ok = ok || (r["Msg_type"] == "status" && r["Msg_text"] == "OK")
	}
	if !ok {
		return errors.New("CHECK TABLE " + name + ": " + strings.Join(msgs, "; "))
	}
	return nil
}
