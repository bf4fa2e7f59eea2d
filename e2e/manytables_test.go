//go:build e2e

package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// The many-tables shape of issue 25 at e2e size: manySchemas schemas of manyPerSchema
// tables each, one in manyMyISAMEvery MyISAM, the rest InnoDB (one .ibd each), 3 rows each.
const (
	manySchemas     = 20
	manyPerSchema   = 100
	manyMyISAMEvery = 10
)

// manyTablesCache are the table caches of TestManyTables's servers: a quarter of the tables.
var manyTablesCache = []string{"--table-open-cache=500", "--table-definition-cache=500", "--innodb-open-files=500"}

// TestManyTables (issue 25): a server with 2000 small tables (a schema per customer, mixed
// InnoDB and MyISAM) is backed up to a directory and to a directory repository; each is
// restored, a server is started on the restored datadir, and it holds every table (the
// count per engine equals the source's) with the source's CHECKSUM TABLE. The source is
// idle, so the backups and the source hold the same rows. The servers' table caches
// (manyTablesCache) are smaller than the table count on purpose: they close tablespaces
// LRU, as a server with 100,000 tables must.
func TestManyTables(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	// The source's commits and .frm files need not be durable (it is not crashed): without
	// their fsyncs the CREATE TABLEs take a quarter of the time.
	src := testdb.Start(t, testdb.Options{NoBinlog: true,
		Args: append([]string{"--innodb-flush-log-at-trx-commit=0", "--skip-sync-frm"}, manyTablesCache...)})
	start := time.Now()
	createManyTables(t, src)
	t.Logf("created %d tables in %s", manySchemas*manyPerSchema, time.Since(start).Round(time.Millisecond))
	db := src.DB(t)
	t.Logf("source: open_files_limit, table_open_cache, innodb_open_files = %s",
		src.QueryString(t, "SELECT CONCAT_WS(', ', @@open_files_limit, @@table_open_cache, @@innodb_open_files)"))
	wantEngines := engineCounts(t, db)
	if want := fmt.Sprintf("InnoDB=%d MyISAM=%d", manySchemas*manyPerSchema*(manyMyISAMEvery-1)/manyMyISAMEvery,
		manySchemas*manyPerSchema/manyMyISAMEvery); wantEngines != want {
		t.Fatalf("source tables: %s, want %s", wantEngines, want)
	}
	want := testdb.Checksums(t, db, manySchemaNames()...)

	tmp := testdb.ShortDir(t)
	bk := filepath.Join(tmp, "bk")
	mustFerry(t, backupArgs(src, bk, "--parallel", "2")...)
	rest := filepath.Join(tmp, "r-dir")
	mustFerry(t, "restore", "--target-dir", bk, "--datadir", rest, "--parallel", "2")
	checkManyTables(t, "directory", rest, wantEngines, want)

	repo := filepath.Join(tmp, "repo")
	dirRepoBackup(t, src, repo)
	rest = filepath.Join(tmp, "r-repo")
	mustFerry(t, "restore", "--repo", repo, "latest", "--datadir", rest, "--parallel", "2")
	checkManyTables(t, "repository", rest, wantEngines, want)
}

// manySchemaNames are the schemas createManyTables makes.
func manySchemaNames() []string {
	names := make([]string, manySchemas)
	for i := range names {
		names[i] = fmt.Sprintf("cust%02d", i)
	}
	return names
}

// createManyTables makes the tables of TestManyTables, one multi-statement batch per
// schema, on two connections at once.
func createManyTables(t *testing.T, s *testdb.Server) {
	t.Helper()
	db := s.DB(t)
	var g errgroup.Group
	g.SetLimit(2)
	for _, schema := range manySchemaNames() {
		g.Go(func() error {
			var b strings.Builder
			fmt.Fprintf(&b, "CREATE DATABASE %s;", schema)
			for i := range manyPerSchema {
				engine := "InnoDB"
				if i%manyMyISAMEvery == manyMyISAMEvery-1 {
					engine = "MyISAM"
				}
				fmt.Fprintf(&b, "CREATE TABLE %s.t%03d (id INT PRIMARY KEY, a INT, b VARCHAR(64)) ENGINE=%s;", schema, i, engine)
				fmt.Fprintf(&b, "INSERT INTO %s.t%03d VALUES (1, %d, '%s-a'), (2, %d, '%s-b'), (3, %d, '%s-c');",
					schema, i, i, schema, i*7, schema, i*13, schema)
			}
			if _, err := db.Exec(b.String()); err != nil {
				return fmt.Errorf("create the tables of %s: %w", schema, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// engineCounts is "InnoDB=N MyISAM=M": the tables of createManyTables's schemas per engine.
func engineCounts(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query("SELECT COALESCE(ENGINE, 'none'), COUNT(*) FROM information_schema.TABLES " +
		"WHERE TABLE_SCHEMA LIKE 'cust%' AND TABLE_TYPE = 'BASE TABLE' GROUP BY 1 ORDER BY 1")
	if err != nil {
		t.Fatalf("count tables per engine: %v", err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var engine string
		var n int
		if err := rows.Scan(&engine, &n); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s=%d", engine, n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(parts, " ")
}

// checkManyTables starts a server on a restored datadir and checks that it holds the
// source's tables per engine, each with the source's checksum.
func checkManyTables(t *testing.T, what, datadir, wantEngines string, want map[string]string) {
	t.Helper()
	rs := testdb.Start(t, testdb.Options{Datadir: datadir, NoBinlog: true, ServerID: 2, Args: manyTablesCache})
	db := rs.DB(t)
	if got := engineCounts(t, db); got != wantEngines {
		t.Errorf("%s restore: tables %s, want %s", what, got, wantEngines)
	}
	got := testdb.Checksums(t, db, manySchemaNames()...)
	bad := 0
	for name, sum := range want {
		if got[name] != sum {
			if bad++; bad <= 10 {
				t.Errorf("%s restore: table %s checksum %q, want %q", what, name, got[name], sum)
			}
		}
	}
	if bad > 0 || len(got) != len(want) {
		t.Errorf("%s restore: %d of %d tables differ; %d tables restored", what, bad, len(want), len(got))
	}
	rs.Stop(t)
}
