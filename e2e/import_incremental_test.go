//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestImportThenIncremental (issue 22, finding 2): after a full backup, one table is put
// back by ferry's own `restore --tables --into-server --rename-to` and an existing one
// is replaced by a manual DISCARD/IMPORT TABLESPACE of another table's exported file;
// the import's pages carry no LSN above the base, so an incremental choosing pages by
// LSN skipped them and the chain restored t_back.ibd empty. The incrementals to a
// directory, a stream and a repository now copy both tablespaces whole: each chain
// restores with every table's checksum equal to the live one, and verify of the
// repository chain passes, while verify of a chain missing the table fails naming it.
func TestImportThenIncremental(t *testing.T) {
	src := testdb.Start(t, testdb.Options{LogFileSize: "64M", ServerID: 1,
		Args: []string{"--innodb-max-dirty-pages-pct=0", "--innodb-max-dirty-pages-pct-lwm=0.001"}})
	src.Exec(t, "CREATE DATABASE shop")
	for _, tb := range []string{"t", "u", "v"} {
		src.Exec(t, "CREATE TABLE shop."+tb+" (id INT PRIMARY KEY, pad VARCHAR(200)) ENGINE=InnoDB")
	}
	src.Exec(t, "INSERT INTO shop.t SELECT seq, REPEAT(MD5(seq), 4) FROM shop.seq_1_to_3000")
	src.Exec(t, "INSERT INTO shop.u SELECT seq, 'old' FROM shop.seq_1_to_500")
	src.Exec(t, "INSERT INTO shop.v SELECT seq, REPEAT(SHA1(seq), 3) FROM shop.seq_1_to_4000")
	tmp := testdb.ShortDir(t)
	full, repoDir := filepath.Join(tmp, "full"), filepath.Join(tmp, "repo")
	fullStream := filepath.Join(tmp, "full.xbs")
	if err := os.MkdirAll(repoDir, 0o750); err != nil {
		t.Fatal(err)
	}
	mustFerry(t, backupArgs(src, full)...)
	streamTo := streamToFile(t, streamArgs(src), fullStream)
	mustFerry(t, repoBackupArgs(src, repoDir)...)

	// The two imports, then a checkpoint past them (as in the report).
	mustFerry(t, "restore", "--target-dir", full, "--tables", "shop.t", "--rename-to", "t_back", "--into-server", "--socket", src.Socket, "--user", "root")
	importManually(t, src, tmp, "v", "u")
	// Writes after the imports: page 0 of each imported file gets a new LSN (its
	// tablespace grows), the imported pages keep LSN 0.
	src.Exec(t, "UPDATE shop.t SET pad = 'changed' WHERE id <= 10")
	src.Exec(t, "INSERT INTO shop.u SELECT seq + 10000, REPEAT('after', 30) FROM shop.seq_1_to_3000")
	src.Exec(t, "INSERT INTO shop.t_back SELECT seq + 10000, REPEAT('after', 30) FROM shop.seq_1_to_3000")
	waitCheckpoint(t, src, lsnNow(t, src))
	for _, f := range []string{"t_back", "u"} {
		t.Logf("live shop/%s.ibd: %s", f, pageLSNs(t, filepath.Join(src.Datadir, "shop", f+".ibd")))
	}

	inc, incStream := filepath.Join(tmp, "inc"), filepath.Join(tmp, "inc.xbs")
	mustFerry(t, backupArgs(src, inc, "--incremental-basedir", full)...)
	streamLog := streamWithLog(t, streamArgs(src, "--incremental-lsn", strconv.FormatUint(streamTo, 10)), incStream)
	mustFerry(t, repoBackupArgs(src, repoDir, "--incremental")...)
	// The imported tablespaces are copied whole: by their identity against the base's
	// manifest, and in the stream (whose base is only an LSN) by the redo's file
	// records of DISCARD and IMPORT (page 0 was written since). The redo of an import
	// also names the space id the imported file had where it was exported (t's and v's
	// here): those are copied whole too, a cost and never a loss. No other is.
	for _, f := range readManifest(t, inc).Files {
		if f.Kind == manifest.KindDelta && f.Space != nil {
			imported := f.Path == "shop/t_back.ibd.delta" || f.Path == "shop/u.ibd.delta"
			exportedFrom := f.Path == "shop/t.ibd.delta" || f.Path == "shop/v.ibd.delta"
			if f.Space.Whole != imported && !exportedFrom {
				t.Errorf("directory incremental: %s copied whole: %v, want %v", f.Path, f.Space.Whole, imported)
			}
		}
	}
	for _, f := range []string{"shop/t_back.ibd", "shop/u.ibd"} {
		if m := regexp.MustCompile(`tablespace copied whole" file=` + f + `.*`).FindString(streamLog); m != "" {
			t.Logf("stream incremental: %s", m)
		} else {
			t.Errorf("the stream incremental did not copy %s whole:\n%s", f, tail(streamLog, 20))
		}
	}
	want := testdb.Checksums(t, src.DB(t), "shop")
	if len(want) != 4 {
		t.Fatalf("live shop tables: %v", want)
	}

	restored := func(t *testing.T, name string, args ...string) {
		t.Helper()
		datadir := filepath.Join(tmp, "r-"+name)
		mustFerry(t, append(args, "--datadir", datadir)...)
		for _, f := range []string{"t_back", "u"} {
			if fi, err := os.Stat(filepath.Join(datadir, "shop", f+".ibd")); err != nil || fi.Size() == 0 {
				t.Errorf("%s chain: shop/%s.ibd restored %v (size %d): the imported tablespace was lost", name, f, err, sizeOf(fi))
			}
		}
		rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
		compareChecksums(t, want, testdb.Checksums(t, rep.DB(t), "shop"))
		rep.Stop(t)
	}
	t.Run("directory", func(t *testing.T) {
		restored(t, "dir", "restore", "--target-dir", full, "--incremental-dir", inc)
	})
	t.Run("directory, mariadb-backup prepare", func(t *testing.T) {
		mbFull := copyBackup(t, full, filepath.Join(tmp, "mbprep"))
		mbPrepare(t, "mariadb-backup", "--target-dir="+mbFull)
		mbPrepare(t, "mariadb-backup", "--target-dir="+mbFull, "--incremental-dir="+inc)
		restored(t, "mbprep", "restore", "--target-dir", mbFull)
	})
	t.Run("repository", func(t *testing.T) {
		mustFerry(t, "verify", "--repo", repoDir, "latest")
		restored(t, "repo", "restore", "--repo", repoDir, "latest")
	})
	t.Run("stream", func(t *testing.T) {
		restored(t, "stream", "restore", "--from", fullStream, "--from", incStream)
	})
	t.Run("verify fails a chain missing the import", func(t *testing.T) {
		bad := filepath.Join(tmp, "repo-old")
		copyBackup(t, repoDir, bad)
		id := dropImport(t, bad, "shop/t_back.ibd.delta")
		wantFail(t, nil, "backup "+id+" failed verification: damaged: the chain would restore shop/t_back.ibd (space id", "verify", "--repo", bad, "latest")
	})
}

// dropImport makes of the newest backup in the directory repository repo what an
// incremental by page LSN made of an imported table: its delta (path) holds no page.
// It takes the stored bytes of another tablespace's empty delta in the same backup
// (whose entry goes: blobs do not overlap). It returns the backup's id.
func dropImport(t testing.TB, repoDir, path string) string {
	t.Helper()
	ids, _ := filepath.Glob(filepath.Join(repoDir, "backups", "*", "manifest.json"))
	sort.Strings(ids)
	mp := ids[len(ids)-1]
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var empty manifest.File
	var files []manifest.File
	for _, f := range m.Files {
		if empty.Path == "" && f.Kind == manifest.KindDelta && f.Size == 16384 && f.Space != nil && !f.Space.System {
			empty = f
			continue
		}
		files = append(files, f)
	}
	if empty.Path == "" {
		t.Fatalf("%s: no empty delta to take", mp)
	}
	found := false
	for i, f := range files {
		if f.Path == path {
			f.Size, f.CRC32C, f.Blobs = empty.Size, empty.CRC32C, empty.Blobs
			f.Space.Whole = false
			files[i], found = f, true
		}
	}
	if !found {
		t.Fatalf("%s: no %s", mp, path)
	}
	m.Files = files
	if b, err = json.Marshal(&m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, b, 0o640); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// streamWithLog runs a stream backup into path and returns its log.
func streamWithLog(t testing.TB, args []string, path string) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(ferryBin, args...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ferry %v: %v\n%s", args, err, tail(errb.String(), 20))
	}
	return errb.String()
}

// importManually replaces table into's tablespace with a copy of table from's, as a
// DBA does: FLUSH TABLES from FOR EXPORT, copy its .ibd and .cfg, DISCARD TABLESPACE
// of into, put the copies in its place, IMPORT TABLESPACE.
func importManually(t testing.TB, s *testdb.Server, tmp, from, into string) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.DB(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("FLUSH TABLES shop." + from + " FOR EXPORT")
	for _, ext := range []string{".ibd", ".cfg"} {
		copyInto(t, filepath.Join(s.Datadir, "shop", from+ext), filepath.Join(tmp, "export"+ext))
	}
	exec("UNLOCK TABLES")
	exec("ALTER TABLE shop." + into + " DISCARD TABLESPACE")
	for _, ext := range []string{".ibd", ".cfg"} {
		copyInto(t, filepath.Join(tmp, "export"+ext), filepath.Join(s.Datadir, "shop", into+ext))
	}
	exec("ALTER TABLE shop." + into + " IMPORT TABLESPACE")
}

// copyInto copies a file, failing the test on error.
func copyInto(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

var checkpointRe = regexp.MustCompile(`Last checkpoint at\s+(\d+)`)

// waitCheckpoint waits until the server's checkpoint reaches lsn.
func waitCheckpoint(t testing.TB, s *testdb.Server, lsn uint64) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("checkpoint at LSN %d", lsn), func() bool {
		return checkpointLSN(t, s) >= lsn
	})
}

// checkpointLSN is the server's last checkpoint (SHOW ENGINE INNODB STATUS).
func checkpointLSN(t testing.TB, s *testdb.Server) uint64 {
	t.Helper()
	var typ, name, status string
	if err := s.DB(t).QueryRow("SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		t.Fatal(err)
	}
	m := checkpointRe.FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("SHOW ENGINE INNODB STATUS has no checkpoint:\n%s", status)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// pageLSNs summarizes the FIL_PAGE_LSNs of a tablespace file's pages (16K pages).
func pageLSNs(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 16384
	zero, low, high := 0, uint64(1<<63), uint64(0)
	for off := 0; off+ps <= len(b); off += ps {
		lsn := binary.BigEndian.Uint64(b[off+16:])
		if lsn == 0 {
			zero++
		}
		low, high = min(low, lsn), max(high, lsn)
	}
	return fmt.Sprintf("%d pages, page 0 LSN %d, %d pages at LSN 0, LSNs %d..%d", len(b)/ps, binary.BigEndian.Uint64(b[16:]), zero, low, high)
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}
