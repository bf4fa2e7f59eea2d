//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// incLinks is how many incrementals each chain gets on its full backup.
const incLinks = 3

// TestIncrementalChains: under the bank, non-InnoDB and DDL workloads, a full backup
// and three incrementals are taken into a directory (--incremental-basedir), as
// streams (--incremental-lsn) and into an S3 repository (--incremental), and by
// mariadb-backup. Each chain restored by ferry holds the invariants at exactly its last
// incremental's GTID, replicates from there and matches the source's checksums; so
// does ferry's directory chain prepared by mariadb-backup, and mariadb-backup's chain
// restored by ferry. The directory incrementals found their pages in the redo and
// store far less than the full backup; a chain with a link missing or out of order,
// an incremental alone, and an incremental on another server's base are refused; expire
// keeps the full backup a kept incremental needs.
func TestIncrementalChains(t *testing.T) {
	mb, err := exec.LookPath("mariadb-backup")
	if err != nil {
		t.Fatal("mariadb-backup is not installed (apt-get install mariadb-backup; .ci/run does it)")
	}
	// Flushing eagerly moves the checkpoint during and between the backups (so that a
	// base's pages were copied while they changed), while a 64 MiB log still holds the
	// redo since the last backup.
	opts := testdb.Options{LogFileSize: "64M", ServerID: 1, Args: []string{"--innodb-max-dirty-pages-pct=0", "--innodb-max-dirty-pages-pct-lwm=0.001"}}
	src, load := loadedSource(t, opts, 2, 20000)
	s3 := newS3Repo(t, "ferry-inc", "db1")
	tmp := testdb.ShortDir(t)
	dirs, streams, mbDirs := make([]string, incLinks+1), make([]string, incLinks+1), make([]string, 3)
	var streamTo uint64
	// The full backup's redo starts at the server's checkpoint: made now, the pages the
	// initial load wrote are not what the first incremental copies (a slow page cleaner
	// would otherwise leave them all after the full's start, and the first delta big).
	src.Exec(t, "SET GLOBAL innodb_log_checkpoint_now = ON")
	load.Start()
	time.Sleep(time.Second)
	for k := 0; k <= incLinks; k++ {
		dirs[k] = filepath.Join(tmp, "dir"+strconv.Itoa(k))
		args := backupArgs(src, dirs[k])
		if k > 0 {
			args = append(args, "--incremental-basedir", dirs[k-1])
		}
		mustFerry(t, args...)

		streams[k] = filepath.Join(tmp, "stream"+strconv.Itoa(k)+".xbs")
		sargs := streamArgs(src)
		if k > 0 {
			sargs = append(sargs, "--incremental-lsn", strconv.FormatUint(streamTo, 10))
		}
		streamTo = streamToFile(t, sargs, streams[k])

		rargs := repoBackupArgs(src, s3.url, "--part-size", "2M")
		if k > 0 {
			rargs = append(rargs, "--incremental")
		}
		s3.run(t, rargs...)

		if k < len(mbDirs) {
			mbDirs[k] = filepath.Join(tmp, "mb"+strconv.Itoa(k))
			margs := []string{"--backup", "--socket=" + src.Socket, "--user=root", "--target-dir=" + mbDirs[k]}
			if k > 0 {
				margs = append(margs, "--incremental-basedir="+mbDirs[k-1])
			}
			mbBackupUnderDDL(t, mb, mbDirs[k], margs)
		}
		time.Sleep(1500 * time.Millisecond) // the workloads change some pages before the next link
	}
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))
	checkIncrementals(t, dirs)
	checkNativeChain(t, dirs[0], dirs[1:])

	t.Run("refused", func(t *testing.T) { refusedChains(t, src, tmp, dirs) })
	t.Run("expire keeps the base", func(t *testing.T) { expireKeepsBase(t, s3) })

	last := readManifest(t, dirs[incLinks])
	gtid := last.Coordinates.GTIDBinlogPos
	t.Run("directory", func(t *testing.T) {
		datadir := filepath.Join(tmp, "r-dir")
		args := []string{"restore", "--target-dir", dirs[0], "--datadir", datadir}
		for _, d := range dirs[1:] {
			args = append(args, "--incremental-dir", d)
		}
		out := mustFerry(t, args...)
		if n := strings.Count(out.stderr, "running crash recovery") + strings.Count(out.stderr, "redo applied natively"); n != 1 {
			t.Errorf("the chain of ferry incrementals ran %d recoveries, want one", n)
		}
		if strings.Contains(out.stderr, "redo applied natively") && !strings.Contains(out.stderr, "parsed_ahead=true") {
			t.Errorf("the native apply parsed the newest link's log after the copy, not while it was made")
		}
		if !regexp.MustCompile(`pages_left_to_a_later_link=[1-9]`).MatchString(out.stderr) {
			t.Errorf("no page was left to a later link: pages changed in several links were written more than once")
		}
		if !regexp.MustCompile(`without the pages they replace" incrementals=\d+ pages_left_to_them=[1-9]`).MatchString(out.stderr) {
			t.Errorf("the full backup's copy left no page to the incrementals: the pages they replace were written twice")
		}
		checkReplica(t, src, load, datadir, gtid, want)
	})
	t.Run("streams", func(t *testing.T) {
		datadir := filepath.Join(tmp, "r-stream")
		args := []string{"restore", "--datadir", datadir}
		for _, s := range streams {
			args = append(args, "--from", s)
		}
		out := mustFerry(t, args...)
		checkReplica(t, src, load, datadir, restoredGTID(t, out.stdout), want)
	})
	t.Run("s3 repository", func(t *testing.T) {
		list := s3.run(t, "list", "--repo", s3.url)
		if strings.Count(list.stdout, "incremental") < incLinks {
			t.Errorf("list does not show the incrementals:\n%s", list.stdout)
		}
		s3.run(t, "verify", "--repo", s3.url, "latest")
		datadir := filepath.Join(tmp, "r-s3")
		out := s3.run(t, "restore", "--repo", s3.url, "latest", "--datadir", datadir)
		checkReplica(t, src, load, datadir, restoredGTID(t, out.stdout), want)
	})
	t.Run("ferry chain, mariadb-backup prepare", func(t *testing.T) {
		full := copyBackup(t, dirs[0], filepath.Join(tmp, "mbprep"))
		mbPrepare(t, mb, "--target-dir="+full)
		for i, d := range dirs[1:] {
			// mariadb-backup removes the deltas it applied: it gets a copy.
			inc := copyBackup(t, d, filepath.Join(tmp, "mbprep-inc"+strconv.Itoa(i+1)))
			mbPrepare(t, mb, "--target-dir="+full, "--incremental-dir="+inc)
		}
		datadir := filepath.Join(tmp, "r-mbprep")
		mustFerry(t, "restore", "--target-dir", full, "--datadir", datadir)
		checkReplica(t, src, load, datadir, gtid, want)
	})
	t.Run("mariadb-backup chain, ferry restore", func(t *testing.T) {
		datadir := filepath.Join(tmp, "r-mb")
		args := []string{"restore", "--target-dir", mbDirs[0], "--datadir", datadir}
		for _, d := range mbDirs[1:] {
			args = append(args, "--incremental-dir", d)
		}
		out := mustFerry(t, args...)
		checkReplica(t, src, load, datadir, restoredGTID(t, out.stdout), want)
	})
}

// checkIncrementals checks the directory chain's manifests: each incremental links to
// the backup before it, found its pages in the redo, and stores much less than the
// full backup's tablespaces.
func checkIncrementals(t *testing.T, dirs []string) {
	t.Helper()
	full := readManifest(t, dirs[0])
	var fullInnoDB int64
	for _, f := range full.Files {
		if f.Kind == manifest.KindInnoDB {
			fullInnoDB += f.Size
		}
	}
	prev := full
	for _, d := range dirs[1:] {
		m := readManifest(t, d)
		inc := m.Incremental
		if m.Type != manifest.TypeIncremental || inc == nil || inc.BaseID != prev.ID || inc.BaseToLSN != prev.ChainLSN() || inc.FromLSN != prev.StartLSN {
			t.Fatalf("%s: type %q, incremental %+v; want an incremental on %s (to %d, start %d)", d, m.Type, inc, prev.ID, prev.ChainLSN(), prev.StartLSN)
		}
		if inc.Method != "redo" {
			t.Errorf("%s: changed pages found by %q, want redo (the 64 MiB log holds the redo since the base)", d, inc.Method)
		}
		var deltas, whole int64
		for _, f := range m.Files {
			switch {
			case f.Kind == manifest.KindDelta && f.Space != nil && f.Space.Whole:
				whole += f.Size // a tablespace the DDL workload re-created since the base
			case f.Kind == manifest.KindDelta:
				deltas += f.Size
			case f.Kind == manifest.KindInnoDB && !strings.HasSuffix(f.Path, ".new"):
				t.Errorf("%s: holds the whole tablespace %s in an incremental", d, f.Path)
			}
		}
		if deltas == 0 || deltas > fullInnoDB/3 {
			t.Errorf("%s: %d bytes of deltas for %d bytes of tablespaces: want a small fraction", d, deltas, fullInnoDB)
		}
		t.Logf("%s: %d bytes of deltas of %d (%s), from LSN %d, and %d bytes of tablespaces re-created since copied whole", filepath.Base(d), deltas, fullInnoDB, inc.Method, inc.FromLSN, whole)
		prev = m
	}
}

// refusedChains: a link missing, links out of order, an incremental restored or
// prepared alone, incremental flags that do not go together and an incremental on
// another server's backup are refused with one line each.
func refusedChains(t *testing.T, src *testdb.Server, tmp string, dirs []string) {
	datadir := filepath.Join(tmp, "never")
	wantFail(t, nil, "the chain is broken", "restore", "--target-dir", dirs[0], "--incremental-dir", dirs[2], "--datadir", datadir)
	wantFail(t, nil, "the chain is broken", "restore", "--target-dir", dirs[0], "--incremental-dir", dirs[2], "--incremental-dir", dirs[1], "--datadir", datadir)
	wantFail(t, nil, "is an incremental backup", "restore", "--target-dir", dirs[1], "--datadir", datadir)
	wantFail(t, nil, "must be a full backup", "restore", "--target-dir", dirs[1], "--incremental-dir", dirs[2], "--datadir", datadir)
	// A damaged delta in the second link: every link is checked against its manifest
	// before any is applied, and the restore refuses the chain.
	damaged := copyBackup(t, dirs[2], filepath.Join(tmp, "damaged-link"))
	deltas, _ := filepath.Glob(filepath.Join(damaged, "*", "*.delta"))
	if len(deltas) == 0 {
		t.Fatalf("no delta in %s", damaged)
	}
	flipByte(t, deltas[0], 16384+100)
	args := []string{"restore", "--target-dir", dirs[0], "--datadir", datadir}
	for _, d := range append([]string{dirs[1], damaged}, dirs[3:]...) {
		args = append(args, "--incremental-dir", d)
	}
	wantFail(t, nil, "is corrupt: CRC-32C", args...)
	if _, err := os.Stat(datadir); err == nil {
		t.Errorf("a refused restore left %s behind", datadir)
	}
	// The newest link's redo log is read (the others' are not: each link's metadata
	// files are left to the next), so it is checked.
	newest := copyBackup(t, dirs[len(dirs)-1], filepath.Join(tmp, "damaged-newest"))
	flipByte(t, filepath.Join(newest, "ib_logfile0"), 12288+100)
	args = []string{"restore", "--target-dir", dirs[0], "--datadir", datadir}
	for _, d := range append(slices.Clone(dirs[1:len(dirs)-1]), newest) {
		args = append(args, "--incremental-dir", d)
	}
	wantFail(t, nil, "ib_logfile0 is corrupt: CRC-32C", args...)
	wantFail(t, nil, "need --repo", backupArgs(src, filepath.Join(tmp, "x"), "--incremental")...)
	wantFail(t, nil, "applies on a backup of that repository", "backup", "--socket", src.Socket, "--user", "root",
		"--repo", filepath.Join(tmp, "repo-x"), "--incremental-basedir", dirs[0])
	wantFail(t, nil, "is an incremental backup", "prepare", "--target-dir", dirs[1])
	other := testdb.Start(t, testdb.Options{ServerID: 9})
	wantFail(t, nil, "another server", backupArgs(other, filepath.Join(tmp, "other-inc"), "--incremental-basedir", dirs[0])...)
}

// flipByte inverts the byte at off of the file at path.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// expireKeepsBase: with only the newest backup to keep, expire keeps the whole chain it
// needs, says so in its dry run, and the newest backup still restores (checked after).
func expireKeepsBase(t *testing.T, r *s3Repo) {
	before := listRepo(t, r.env, r.url)
	dry := r.run(t, "expire", "--repo", r.url, "--keep-last", "1", "--dry-run")
	if !strings.Contains(dry.stdout+dry.stderr, "base of kept incremental") {
		t.Errorf("expire --dry-run does not say it keeps the chain's bases:\n%s%s", dry.stdout, dry.stderr)
	}
	r.run(t, "expire", "--repo", r.url, "--keep-last", "1")
	if after := listRepo(t, r.env, r.url); len(after) != len(before) {
		t.Errorf("expire --keep-last 1 removed %d of the %d backups of one chain", len(before)-len(after), len(before))
	}
}

var toLSNRe = regexp.MustCompile(`to_lsn=(\d+)`)

// streamToFile runs a stream backup into path and returns its to_lsn, which an
// incremental on it gives as --incremental-lsn.
func streamToFile(t testing.TB, args []string, path string) uint64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, args...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ferry %s: %v\n%s", strings.Join(args, " "), err, tail(errb.String(), 20))
	}
	m := toLSNRe.FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("the stream backup did not log its to_lsn:\n%s", tail(errb.String(), 10))
	}
	lsn, _ := strconv.ParseUint(m[1], 10, 64)
	return lsn
}

// mbPrepare runs mariadb-backup --prepare with args.
func mbPrepare(t testing.TB, mb string, args ...string) {
	t.Helper()
	if out, err := exec.Command(mb, append([]string{"--prepare"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-backup --prepare %v: %v\n%s", args, err, tail(string(out), 20))
	}
}

// TestIncrementalScanAfterRedoLapped: when the server's 8 MiB log no longer holds the
// redo since the base (a bulk update wrote far more in between), the incremental reads
// every page instead, says why, and the chain restores consistent.
func TestIncrementalScanAfterRedoLapped(t *testing.T) {
	src, load := loadedSource(t, testdb.Options{LogFileSize: "8M", ServerID: 1}, 1, 20000)
	tmp := testdb.ShortDir(t)
	full, inc := filepath.Join(tmp, "full"), filepath.Join(tmp, "inc")
	load.Start()
	mustFerry(t, backupArgs(src, full)...)
	before := lsnNow(t, src)
	for lsnNow(t, src)-before < 3*(8<<20) {
		src.Exec(t, "UPDATE filler.t SET pad = REVERSE(pad) WHERE id % 3 = 0")
	}
	out := mustFerry(t, backupArgs(src, inc, "--incremental-basedir", full)...)
	load.Stop(t)
	want := testdb.Checksums(t, src.DB(t))
	m := readManifest(t, inc)
	if m.Incremental == nil || m.Incremental.Method != "scan" || !strings.Contains(out.stderr, "no longer holds") {
		t.Fatalf("incremental after the log was overwritten: %+v; want the scan, and the log saying why:\n%s", m.Incremental, tail(out.stderr, 10))
	}
	datadir := filepath.Join(tmp, "restored")
	mustFerry(t, "restore", "--target-dir", full, "--incremental-dir", inc, "--datadir", datadir)
	checkReplica(t, src, load, datadir, m.Coordinates.GTIDBinlogPos, want)
}
