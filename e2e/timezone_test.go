//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestTimeZoneRoundTrip: with TZ=Europe/Berlin for ferry, list and the recoverable
// window print times with their offset, in Berlin's; a backup's end copied from list
// into restore --to-time reaches the instant it names: the restored bank ends at the
// last transfer the server's own binlog (read in UTC by mariadb-binlog) shows at or
// before that instant, and the restored copy holds the workloads' invariants there.
func TestTimeZoneRoundTrip(t *testing.T) {
	t.Parallel()
	mbinlog, err := exec.LookPath("mariadb-binlog")
	if err != nil {
		t.Fatal("mariadb-binlog is not installed (it comes with mariadb-client; .ci/run installs it)")
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tz := []string{"TZ=Europe/Berlin"}
	run := func(args ...string) result {
		t.Helper()
		res := ferry(t, tz, args...)
		if res.err != nil {
			t.Fatalf("ferry %s failed: %v\n%s", strings.Join(args, " "), res.err, res.stderr)
		}
		return res
	}
	src, load := loadedSource(t, testdb.Options{ServerID: 1}, 2, 1000)
	tmp := testdb.ShortDir(t)
	dir := filepath.Join(tmp, "repo")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	startFerry(t, tz, "binlog-archive", "--repo", dir, "--socket", src.Socket, "--user", "root",
		"--compress", "none", "--flush-interval", "200ms")
	load.Start()
	time.Sleep(time.Second)
	id := strings.TrimSpace(run(repoBackupArgs(src, dir)...).stdout)
	time.Sleep(2 * time.Second)
	load.Stop(t)

	// list prints the backup's end in Berlin's time, with the offset.
	stamp := `(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ([+-]\d\d:\d\d))`
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + `\s+full\s.*?` + stamp + `\s+` + stamp)
	m := row.FindStringSubmatch(run("list", "--repo", dir).stdout)
	if m == nil {
		t.Fatalf("list shows no start and end with an offset for %s:\n%s", id, run("list", "--repo", dir).stdout)
	}
	copied := m[3]
	var doc struct {
		Backups []struct {
			ID  string    `json:"id"`
			End time.Time `json:"end"`
		} `json:"backups"`
	}
	if err := json.Unmarshal([]byte(run("list", "--repo", dir, "--json").stdout), &doc); err != nil || len(doc.Backups) != 1 {
		t.Fatalf("list --json: %v, %d backups", err, len(doc.Backups))
	}
	end := doc.Backups[0].End
	at, err := time.Parse("2006-01-02 15:04:05 -07:00", copied)
	if err != nil || !at.Equal(end.Truncate(time.Second)) {
		t.Fatalf("list shows the end as %q, --json as %s: not the same instant (%v)", copied, end, err)
	}
	if _, off := end.In(berlin).Zone(); m[4] != end.In(berlin).Format("-07:00") || off == 0 {
		t.Fatalf("list shows the offset %s, Berlin's is %s", m[4], end.In(berlin).Format("-07:00"))
	}
	if _, off := end.Zone(); off == 0 {
		t.Errorf("list --json shows the end in UTC, not in the host's zone: %s", end)
	}

	// The archive must hold a transaction after that second before a restore reaches it;
	// the recoverable window's end says so, printed with Berlin's offset too.
	window := regexp.MustCompile(`recoverable: from ` + stamp + ` \(backup ` + regexp.QuoteMeta(id) + `, GTID \S+\) to ` + stamp + ` \(GTID`)
	waitFor(t, time.Minute, "the archive to pass the backup's end", func() bool {
		w := window.FindStringSubmatch(run("list", "--repo", dir).stdout)
		if w == nil || w[1] != copied {
			return false
		}
		last, err := time.Parse("2006-01-02 15:04:05 -07:00", w[3])
		return err == nil && last.After(at)
	})

	// verify without an id checks the backup and the archive, and says so.
	if v := run("verify", "--repo", dir).stdout; !regexp.MustCompile(`verified 1 backup \(1 full, 0 incremental\) and the binlog archive \(\d+ files, \d+ segments\): 1 OK, 0 FAILED`).MatchString(v) {
		t.Errorf("verify of the repository does not say it checked the backup and the archive:\n%s", v)
	}

	wantBank := lastBankGTIDAt(t, mbinlog, src, at.UTC())
	datadir := filepath.Join(tmp, "restored")
	out := run("restore", "--repo", dir, "--to-time", copied, "--datadir", datadir)
	gtid := restoredGTID(t, out.stdout)
	if got := testdb.GTIDForDomain(gtid, 7); got != wantBank {
		t.Fatalf("restore --to-time %q ends the bank at %s; the server's binlog has %s as its last transfer at or before %s",
			copied, got, wantBank, at.UTC().Format(time.RFC3339))
	}
	rep := testdb.Start(t, testdb.Options{Datadir: datadir, ServerID: 2})
	load.Check(t, rep.DB(t), gtid)
	t.Logf("--to-time %q (TZ=Europe/Berlin) restored to %s, as %s UTC in the server's binlog", copied, gtid, at.UTC().Format(time.DateTime))
}
