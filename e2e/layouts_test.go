//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestServerLayouts backs up servers configured as production servers are (4k and 64k
// pages, the system tablespace in two files without file-per-table, three undo
// tablespaces), each holding partitions and subpartitions, FULLTEXT, SPATIAL,
// system-versioned tables, sequences, generated columns, foreign keys and names with
// spaces and non-ASCII letters, under the bank workload, to a directory and to a
// stream. Each copy is restored with --write-cnf, started with exactly the options
// written there, and must hold the bank invariants at its GTID, pass mariadb-check
// --extended, replicate from the source and match every table's checksum.
func TestServerLayouts(t *testing.T) {
	t.Parallel() // CPU-bound, no timing assertion: beside another it saves a quarter (docs/testing.md)
	for _, c := range []struct {
		name       string
		args       []string
		systemOnly bool // the feature tables go into the system tablespace
	}{
		{"4k pages", []string{"--innodb-page-size=4k"}, false},
		{"64k pages", []string{"--innodb-page-size=64k"}, false},
		{"two system data files, no file per table", []string{"--innodb-data-file-path=ibdata1:10M;ibdata2:10M:autoextend"}, true},
		{"three undo tablespaces", []string{"--innodb-undo-tablespaces=3"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, load := loadedSource(t, testdb.Options{ServerID: 1, Args: c.args}, 2, 10000)
			if c.systemOnly {
				// The workload's PAGE_COMPRESSED table needs file-per-table; everything
				// after it, and ~12 MB that reach ibdata2, go to the system tablespace.
				src.Exec(t, "SET GLOBAL innodb_file_per_table = OFF")
				src.Exec(t, "CREATE TABLE filler.sys (id INT PRIMARY KEY, pad CHAR(200)) ENGINE=InnoDB")
				src.Exec(t, "INSERT INTO filler.sys SELECT seq, REPEAT('s', 200) FROM filler.seq_1_to_50000")
			}
			loadFeatures(t, src)
			if c.systemOnly {
				src.Exec(t, "SET GLOBAL innodb_file_per_table = ON") // the DDL workload checks its .ibd files
			}
			tmp := testdb.ShortDir(t)
			load.Start()
			time.Sleep(300 * time.Millisecond)
			dir := filepath.Join(tmp, "dir")
			mustFerry(t, backupArgs(src, dir)...)
			stream := filepath.Join(tmp, "full.xbs")
			backupToFile(t, src, stream)
			load.Stop(t)
			checkNativeApply(t, dir)
			want := testdb.Checksums(t, src.DB(t))
			// CHECKSUM TABLE of a table with a VIRTUAL column differs between servers
			// holding the same rows; checkGenerated checks that one.
			delete(want, "fé atures.gen")
			for _, from := range [][]string{{"--target-dir", dir}, {"--from", stream}} {
				datadir := filepath.Join(tmp, "data"+strings.TrimLeft(from[0], "-"))
				cnf := filepath.Join(tmp, strings.TrimLeft(from[0], "-")+".cnf")
				out := mustFerry(t, append([]string{"restore", "--datadir", datadir, "--write-cnf", cnf}, from...)...)
				args := cnfArgs(t, cnf)
				for _, a := range c.args {
					if strings.HasPrefix(a, "--innodb-page-size") || strings.HasPrefix(a, "--innodb-data-file-path") || strings.HasPrefix(a, "--innodb-undo-tablespaces") {
						if !strings.Contains(out.stdout, strings.ReplaceAll(strings.SplitN(a, "=", 2)[0], "_", "-")) {
							t.Errorf("the start hint does not name %s:\n%s", a, out.stdout)
						}
					}
				}
				checkRestored(t, src, load, datadir, restoredGTID(t, out.stdout), args, want, checkGenerated)
			}
		})
	}
}

// loadFeatures creates tables of every kind a production schema has, in a database
// whose name has a space and a non-ASCII letter.
func loadFeatures(t testing.TB, s *testdb.Server) {
	s.Exec(t, "CREATE DATABASE `fé atures`")
	for _, q := range []string{
		"CREATE TABLE `fé atures`.`tâble 1` (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"INSERT INTO `fé atures`.`tâble 1` SELECT seq, seq FROM `fé atures`.seq_1_to_2000",
		"CREATE TABLE `fé atures`.parts (id INT, d DATE, PRIMARY KEY (id, d)) ENGINE=InnoDB PARTITION BY RANGE (YEAR(d)) SUBPARTITION BY HASH(id) SUBPARTITIONS 2 (PARTITION p0 VALUES LESS THAN (2000), PARTITION p1 VALUES LESS THAN MAXVALUE)",
		"INSERT INTO `fé atures`.parts SELECT seq, DATE('1990-01-01') + INTERVAL seq DAY FROM `fé atures`.seq_1_to_5000",
		"CREATE TABLE `fé atures`.ft (id INT PRIMARY KEY, body TEXT, FULLTEXT (body)) ENGINE=InnoDB",
		"INSERT INTO `fé atures`.ft SELECT seq, CONCAT('word', seq, ' common text ', MD5(seq)) FROM `fé atures`.seq_1_to_2000",
		"CREATE TABLE `fé atures`.geo (id INT PRIMARY KEY, g POINT NOT NULL, SPATIAL INDEX (g)) ENGINE=InnoDB",
		"INSERT INTO `fé atures`.geo SELECT seq, POINT(seq % 100, seq DIV 100) FROM `fé atures`.seq_1_to_2000",
		"CREATE TABLE `fé atures`.ver (id INT PRIMARY KEY, v INT) ENGINE=InnoDB WITH SYSTEM VERSIONING",
		"INSERT INTO `fé atures`.ver SELECT seq, 0 FROM `fé atures`.seq_1_to_1000",
		"UPDATE `fé atures`.ver SET v = v + 1 WHERE id <= 500",
		"CREATE SEQUENCE `fé atures`.s1 START WITH 100 INCREMENT BY 5",
		"SELECT NEXTVAL(`fé atures`.s1)",
		"CREATE TABLE `fé atures`.gen (id INT PRIMARY KEY, a INT, b INT AS (a * 2) VIRTUAL, c INT AS (a + 1) STORED, INDEX (b)) ENGINE=InnoDB",
		"INSERT INTO `fé atures`.gen (id, a) SELECT seq, seq FROM `fé atures`.seq_1_to_2000",
		"CREATE TABLE `fé atures`.parent (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE `fé atures`.child (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES `fé atures`.parent (id)) ENGINE=InnoDB",
		"INSERT INTO `fé atures`.parent SELECT seq FROM `fé atures`.seq_1_to_100",
		"INSERT INTO `fé atures`.child SELECT seq, 1 + seq % 100 FROM `fé atures`.seq_1_to_1000",
	} {
		s.Exec(t, q)
	}
}

// checkRestored starts a server on a restored datadir with exactly args (the options
// restore wrote with --write-cnf), checks the workload's invariants at gtid and
// mariadb-check --extended, makes it replicate from src and compares every table's
// checksum with want (taken on the source once its load stopped).
// extra, if set, checks more on the running copy.
func checkRestored(t testing.TB, src *testdb.Server, load *testdb.Workload, datadir, gtid string, args []string, want map[string]string, extra func(testing.TB, *testdb.Server)) {
	t.Helper()
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2, Args: args})
	load.Check(t, rep.DB(t), gtid)
	if out := run(t, "", "mariadb-check", "--socket="+rep.Socket, "--user=root", "--extended", "--all-databases"); strings.Contains(strings.ToLower(out), "error") || strings.Contains(strings.ToLower(out), "corrupt") {
		t.Errorf("mariadb-check --extended on the restored copy:\n%s", out)
	}
	testdb.StartReplica(t, rep, src, gtid, "repl", "replpw")
	testdb.WaitCaughtUp(t, rep, src, 2*time.Minute)
	compareChecksums(t, want, testdb.Checksums(t, rep.DB(t)))
	if extra != nil {
		extra(t, rep)
	}
	rep.Stop(t)
}

// checkGenerated checks the generated columns of a restored copy through their index.
func checkGenerated(t testing.TB, s *testdb.Server) {
	t.Helper()
	got := s.QueryString(t, "SELECT CONCAT(COUNT(*), ' ', SUM(b), ' ', SUM(c)) FROM `fé atures`.gen FORCE INDEX (b) WHERE b >= 0")
	if got != "2000 4002000 2003000" {
		t.Errorf("generated columns of the restored copy: %s, want 2000 4002000 2003000", got)
	}
}

// cnfArgs reads a --write-cnf file into mariadbd arguments (its datadir excepted).
func cnfArgs(t testing.TB, path string) []string {
	t.Helper()
	o, err := optfile.Read(path, "mysqld")
	if err != nil {
		t.Fatalf("--write-cnf file: %v", err)
	}
	var args []string
	for k, v := range o {
		if k != "datadir" {
			args = append(args, fmt.Sprintf("--%s=%s", strings.ReplaceAll(k, "_", "-"), v))
		}
	}
	return args
}
