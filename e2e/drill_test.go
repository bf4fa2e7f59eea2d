//go:build e2e

package e2e

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// drillLine is the restore drill's summary line of a backup that passed.
var drillLine = regexp.MustCompile(`(?m)^drill: backup \S+ restored in [0-9.]+m?s, server started, (\d+) tables checked \(CHECK TABLE\), (\d+) checksummed, (\d+) recorded tables compared: OK$`)

// TestRestoreDrill: a repository backup taken while the bank, mixed and DDL workloads
// run passes verify --restore: every table recorded at the backup's end point (the DDL
// workload creates and drops tables during the copy) is in the restored copy, CHECK
// TABLE passes on each, the sample reads whole; the scratch directory is left empty
// and the metrics file says so.
func TestRestoreDrill(t *testing.T) {
	t.Parallel()
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 2000)
	tmp := testdb.ShortDir(t)
	repoDir, scratch, prom := filepath.Join(tmp, "repo"), filepath.Join(tmp, "scratch"), filepath.Join(tmp, "drill.prom")
	if err := os.Mkdir(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(repoDir, 0o700); err != nil {
		t.Fatal(err)
	}
	load.Start()
	bank, ddl := load.Bank.Ops(), load.DDL.Ops()
	mustFerry(t, repoBackupArgs(src, repoDir, "--max-rate", "20M")...) // about a second: the workloads make their mark
	bank, ddl = load.Bank.Ops()-bank, load.DDL.Ops()-ddl
	load.Stop(t)
	t.Logf("during the backup: %d transfers, %d DDL statements", bank, ddl)
	if bank == 0 || ddl == 0 {
		t.Fatalf("the workloads did not run during the backup (%d transfers, %d DDL statements)", bank, ddl)
	}

	r := mustFerry(t, "verify", "--repo", repoDir, "latest", "--restore", "--tmpdir", scratch, "--sample", "3", "--metrics-file", prom)
	t.Logf("drill output: %s", r.stdout)
	m := drillLine.FindStringSubmatch(r.stdout)
	if m == nil || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Fatalf("verify --restore printed %q, want one summary line ending in OK", r.stdout)
	}
	checked, _ := strconv.Atoi(m[1])
	recorded, _ := strconv.Atoi(m[3])
	if m[2] != "3" || checked < recorded || recorded < 10 {
		t.Errorf("summary %q: want 3 checksummed and every recorded table checked", m[0])
	}
	if ents, err := os.ReadDir(scratch); err != nil || len(ents) != 0 {
		t.Errorf("the scratch directory holds %v (%v) after the drill, want nothing", ents, err)
	}
	drillInterrupted(t, repoDir, scratch)
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ferry_drill_success 1", "ferry_drill_tables_checked " + m[1], "ferry_drill_tables_checksummed 3"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics file lacks %q:\n%s", want, b)
		}
	}
}

// TestRestoreDrillFindsDamage: two backups that plain verify passes (every object's
// checksum, every page's) fail verify --restore naming the table at fault:
// (a) a secondary index whose records are out of order on a page with a valid
// checksum (CHECK TABLE finds it); (b) a backup without one table's .ibd (CHECK TABLE:
// its tablespace is missing) and without another's .frm and .ibd (the recorded table
// list: the server no longer knows the table).
func TestRestoreDrillFindsDamage(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	src.Exec(t, "CREATE DATABASE d")
	for _, name := range []string{"bad", "ok", "gone", "gone2"} {
		src.Exec(t, "CREATE TABLE d."+name+" (id INT PRIMARY KEY, k INT NOT NULL, KEY k (k)) ENGINE=InnoDB")
		src.Exec(t, "INSERT INTO d."+name+" SELECT seq, seq FROM d.seq_1_to_20")
	}
	src.Stop(t)
	swapIndexOrder(t, filepath.Join(src.Datadir, "d", "bad.ibd"))
	src.Restart(t)
	tmp := testdb.ShortDir(t)
	repoDir := filepath.Join(tmp, "repo")
	if err := os.Mkdir(repoDir, 0o700); err != nil {
		t.Fatal(err)
	}

	damaged := strings.TrimSpace(mustFerry(t, repoBackupArgs(src, repoDir)...).stdout)
	mustFerry(t, "verify", "--repo", repoDir, damaged)
	r := ferry(t, nil, "verify", "--repo", repoDir, damaged, "--restore", "--tmpdir", tmp)
	wantDrillFailure(t, r, []string{"d.bad"}, []string{"FAILED: d.bad: CHECK TABLE:"})

	src.Exec(t, "DROP TABLE d.bad")
	r = ferry(t, []string{"FERRY_TEST_LEAVE_OUT=d/gone.ibd,d/gone2.frm,d/gone2.ibd"}, repoBackupArgs(src, repoDir)...)
	if r.err != nil {
		t.Fatalf("backup leaving files out: %v", r.err)
	}
	missing := strings.TrimSpace(r.stdout)
	mustFerry(t, "verify", "--repo", repoDir, missing)
	r = ferry(t, nil, "verify", "--repo", repoDir, missing, "--restore", "--tmpdir", tmp)
	wantDrillFailure(t, r, []string{"d.gone", "d.gone2"}, []string{"FAILED: d.gone: ", "FAILED: d.gone2: missing from the restored copy"})
	if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 1 {
		t.Errorf("%s holds %v (%v) after the drills, want only the repository", tmp, ents, err)
	}
}

// wantDrillFailure checks that a drill failed with exit code 4, printed each of lines
// and a summary naming tables, and no other table.
func wantDrillFailure(t *testing.T, r result, tables, lines []string) {
	t.Helper()
	t.Logf("drill output:\n%s", r.stdout)
	wantExit(t, r, 4)
	for _, l := range lines {
		if !strings.Contains(r.stdout, l) {
			t.Errorf("drill output lacks %q:\n%s", l, r.stdout)
		}
	}
	out := strings.Split(strings.TrimSpace(r.stdout), "\n")
	summary := out[len(out)-1]
	if !strings.HasPrefix(summary, "drill: backup ") || !strings.Contains(summary, ": FAILED: ") || !strings.HasSuffix(summary, " in "+strings.Join(tables, ", ")) {
		t.Errorf("summary %q, want a FAILED drill naming %v", summary, tables)
	}
	if strings.Contains(r.stdout, "d.ok") {
		t.Errorf("the sound table d.ok was named:\n%s", r.stdout)
	}
}

// swapIndexOrder breaks the order of the secondary index k of a small stopped table
// (one leaf page per index): its first record's key becomes the largest INT, so that
// it sorts after the records that follow it. The page's checksum is computed again,
// so that every page of the file stays valid.
func swapIndexOrder(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := innodb.ParseSpaceHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	size := h.Flags.PhysicalSize()
	const indexPage, pageHeader = 17855, 38 // FIL_PAGE_INDEX; the page header follows the FIL header
	var leaf []byte
	var leafNo uint32
	var leafIndex uint64
	for no := 0; (no+1)*size <= len(b); no++ {
		p := b[no*size : (no+1)*size]
		level, index := binary.BigEndian.Uint16(p[pageHeader+26:]), binary.BigEndian.Uint64(p[pageHeader+28:])
		if innodb.PageType(p) == indexPage && level == 0 && index > leafIndex { // the secondary index is made after the clustered one
			leaf, leafNo, leafIndex = p, uint32(no), index
		}
	}
	if leaf == nil {
		t.Fatalf("%s: no index leaf page", path)
	}
	const infimum = 99 // PAGE_NEW_INFIMUM: the next-record offset is the 2 bytes before it
	first := infimum + int(int16(binary.BigEndian.Uint16(leaf[infimum-2:])))
	if got := binary.BigEndian.Uint32(leaf[first:]) ^ 1<<31; got != 1 {
		t.Fatalf("%s page %d: the first record's key is %d, want 1 (not index k's leaf?)", path, leafNo, got)
	}
	binary.BigEndian.PutUint32(leaf[first:], 0xFFFFFFFF) // INT 2147483647, stored with its sign bit flipped
	innodb.SealPage(leaf, h.SpaceID, leafNo, h.Flags, innodb.PageLSN(leaf))
	if err := innodb.NewChecker(h, false).Check(leaf, leafNo); err != nil {
		t.Fatalf("the changed page does not validate: %v", err)
	}
	if err := os.WriteFile(path, b, 0o660); err != nil {
		t.Fatal(err)
	}
}

// drillInterrupted stops a drill with SIGTERM while its private server runs, and
// checks that it exits 143 with one line, its server stopped and its scratch
// directory gone.
func drillInterrupted(t *testing.T, repoDir, scratch string) {
	t.Helper()
	cmd := startFerry(t, []string{faultpoint.Env + "=drill-check=1"}, "verify", "--repo", repoDir, "latest", "--restore", "--tmpdir", scratch)
	waitForLog(t, cmd, "test pause at drill-check=1")
	if !serverUnder(scratch) {
		t.Fatalf("no private server runs on a datadir under %s during the drill's checks", scratch)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	b, _ := os.ReadFile(cmd.Stderr.(*os.File).Name())
	checkLast(t, syscall.SIGTERM, err, lastLine(string(b)))
	wantExit(t, result{err: err}, 143)
	if serverUnder(scratch) {
		t.Errorf("the interrupted drill left its private server running")
	}
	if ents, err := os.ReadDir(scratch); err != nil || len(ents) != 0 {
		t.Errorf("the interrupted drill left %v (%v) in %s", ents, err, scratch)
	}
}

// serverUnder tells whether a server runs on a datadir under dir.
func serverUnder(dir string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "--datadir="+dir+"/") {
			return true
		}
	}
	return false
}
