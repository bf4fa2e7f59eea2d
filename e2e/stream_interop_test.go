//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// backupToFile runs ferry backup --stream with its stdout in a file.
func backupToFile(t testing.TB, s *testdb.Server, path string, extra ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, streamArgs(s, extra...)...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ferry backup --stream: %v\n%s", err, tail(errb.String(), 20))
	}
}

// run runs a command with stdin from a file (if any) and fails the test on error.
func run(t testing.TB, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(string(out), 20))
	}
	return string(out)
}

// onlyDB keeps the checksums of one database's tables.
func onlyDB(sums map[string]string, db string) map[string]string {
	out := map[string]string{}
	for k, v := range sums {
		if strings.HasPrefix(k, db+".") {
			out[k] = v
		}
	}
	return out
}

// TestStreamInteropWithStockTools: the stock mbstream unpacks ferry's plain stream
// (taken while DDL runs) into a directory that mariadb-backup --prepare turns into a
// working datadir, applying ferry's .del/.new markers; ferry restores a
// mariadb-backup stream from a pipe; after mbstream -x of a zstd stream, the stock
// zstd gives bytes with the manifest's checksum.
func TestStreamInteropWithStockTools(t *testing.T) {
	mb := testdb.Tool(t, "mariadb-backup", "mariadb-backup")
	mbstream := testdb.Tool(t, "mbstream", "mariadb-backup")
	zstd := testdb.Tool(t, "zstd", "zstd")
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	want := testdb.Checksums(t, src.DB(t))
	tmp := testdb.ShortDir(t)

	t.Run("ferry stream under DDL, mbstream -x, mariadb-backup --prepare", func(t *testing.T) {
		ddl := testdb.NewDDL(t, src.DB(t))
		stopDDL := runDDL(t, ddl)
		time.Sleep(500 * time.Millisecond)
		file := filepath.Join(tmp, "plain.xbs")
		backupToFile(t, src, file, "--compress", "none", "--max-rate", "10M")
		stopDDL()
		dir := filepath.Join(tmp, "unpacked")
		os.Mkdir(dir, 0o750)
		run(t, file, mbstream, "-x", "-C", dir)
		markers, _ := filepath.Glob(filepath.Join(dir, "ddl", "*.[dn]e[lw]"))
		t.Logf("DDL markers in the stream: %d", len(markers))
		run(t, "", mb, "--prepare", "--target-dir="+dir)
		s := testdb.Start(t, testdb.Options{Datadir: dir, ServerID: 3})
		compareChecksums(t, onlyDB(want, "shop"), onlyDB(testdb.Checksums(t, s.DB(t)), "shop"))
		ddl.Check(t, s.DB(t))
	})

	t.Run("ferry stream, mbstream -x, ferry restore --target-dir", func(t *testing.T) {
		file := filepath.Join(tmp, "plain2.xbs")
		backupToFile(t, src, file, "--compress", "none")
		dir := filepath.Join(tmp, "unpacked2")
		os.Mkdir(dir, 0o750)
		run(t, file, mbstream, "-x", "-C", dir)
		datadir := filepath.Join(tmp, "from-unpacked")
		mustFerry(t, "restore", "--target-dir", dir, "--datadir", datadir)
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 4})
		compareChecksums(t, onlyDB(want, "shop"), onlyDB(testdb.Checksums(t, s.DB(t)), "shop"))
	})

	t.Run("mariadb-backup stream piped into ferry restore", func(t *testing.T) {
		datadir := filepath.Join(tmp, "from-mb-stream")
		cmd := exec.Command("bash", "-o", "pipefail", "-c", mb+` --backup --stream=xbstream --socket="$1" --user=root --target-dir=/tmp 2>/dev/null | "$2" restore --from - --datadir "$3"`,
			"-", src.Socket, ferryBin, datadir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mariadb-backup | ferry restore: %v\n%s", err, tail(string(out), 20))
		}
		if !isSparse(t, filepath.Join(datadir, "shop/archive.ibd")) {
			t.Error("the page_compressed tablespace was restored dense")
		}
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 5})
		compareChecksums(t, onlyDB(want, "shop"), onlyDB(testdb.Checksums(t, s.DB(t)), "shop"))
	})

	t.Run("zstd stream, mbstream -x, zstd -d", func(t *testing.T) {
		file := filepath.Join(tmp, "z.xbs")
		backupToFile(t, src, file)
		dir := filepath.Join(tmp, "unpacked-z")
		os.Mkdir(dir, 0o750)
		run(t, file, mbstream, "-x", "-C", dir)
		m := readManifest(t, dir)
		if m.Storage.Compression != "zstd" {
			t.Fatalf("default stream compression %q, want zstd", m.Storage.Compression)
		}
		for _, f := range m.Files {
			if f.Path != "shop/orders.ibd" {
				continue
			}
			out, err := exec.Command(zstd, "-d", "-c", filepath.Join(dir, f.Stored)).Output()
			if err != nil {
				t.Fatalf("zstd -d %s: %v", f.Stored, err)
			}
			if got := checksum.Hex(checksum.Sum(out)); got != f.CRC32C || int64(len(out)) != f.Size {
				t.Fatalf("zstd -d of %s: %d bytes CRC-32C %s, manifest says %d bytes %s", f.Stored, len(out), got, f.Size, f.CRC32C)
			}
		}
		wantFail(t, nil, "restore from the stream itself", "restore", "--target-dir", dir, "--datadir", filepath.Join(tmp, "never"))
		datadir := filepath.Join(tmp, "from-z")
		mustFerry(t, "restore", "--from", file, "--datadir", datadir)
		if !isSparse(t, filepath.Join(datadir, "shop/archive.ibd")) {
			t.Error("the page_compressed tablespace was restored dense")
		}
		s := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 6})
		compareChecksums(t, onlyDB(want, "shop"), onlyDB(testdb.Checksums(t, s.DB(t)), "shop"))
	})
}
