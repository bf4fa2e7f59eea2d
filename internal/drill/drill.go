// Package drill is the restore drill (verify --restore): it restores a backup into a
// scratch directory with internal/restore, starts a private server on the copy (no
// networking, a socket in the scratch directory, no replication), and checks it as
// only a server can: every table the backup recorded at its end point is there, CHECK
// TABLE passes on every table, and a sample of tables (or all) reads row by row
// (CHECKSUM TABLE). Everything it made is removed at the end, failed or not.
package drill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Config configures a drill.
type Config struct {
	// Restore is the restore to run: Mariadbd, UseMemory, Recovery, Keys, Log and
	// progress. Open sets its Source; the drill sets its Datadir, Export, RunDir and
	// Discard.
	Restore restore.Config
	// Open sets the restore's Source (and Replay, for a point in time) once its
	// Datadir, in the scratch directory, is known; done releases what it opened.
	Open func(rc *restore.Config) (done func(), err error)
	// TmpDir is where the scratch directory is made ("": the system's temporary
	// directory). It needs room for the restored datadir.
	TmpDir string
	// Sample is how many user tables, chosen at random, are read whole (CHECKSUM TABLE).
	Sample int
	// Full reads every table whole and runs CHECK TABLE ... EXTENDED.
	Full bool
	// Parallel is how many tables are checked at once (0: 2).
	Parallel int
}

// Report is what a drill did and found.
type Report struct {
	Backup      string        // the backup's id (or where it came from)
	Restored    time.Duration // from the start to a server running on the prepared copy
	Checked     int           // tables CHECK TABLE ran on
	Checksummed int           // tables read whole
	Recorded    int           // tables the backup recorded and the copy was compared with (0: none recorded, or a point in time)
	PointInTime bool          // the copy was rolled forward past the backup
	Failures    []Failure
	Took        time.Duration
}

// OK tells whether the drill found nothing wrong.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

// Summary is the drill's one line: "drill: backup X restored in 12.3s, server started,
// 42 tables checked (CHECK TABLE), 5 checksummed, 40 recorded tables present: OK".
func (r *Report) Summary() string {
	line := fmt.Sprintf("drill: backup %s restored in %s, server started, %d tables checked (CHECK TABLE), %d checksummed", r.Backup,
		r.Restored.Round(100*time.Millisecond), r.Checked, r.Checksummed)
	switch {
	case r.PointInTime:
		line += ", table list not compared (a point in time past the backup)"
	case r.Recorded > 0:
		line += fmt.Sprintf(", %d recorded tables compared", r.Recorded)
	default:
		line += ", no recorded table list to compare (a backup from an older ferry)"
	}
	if r.OK() {
		return line + ": OK"
	}
	tables := make([]string, 0, len(r.Failures))
	seen := map[string]bool{}
	for _, f := range r.Failures {
		if !seen[f.Table] {
			seen[f.Table] = true
			tables = append(tables, f.Table)
		}
	}
	return line + fmt.Sprintf(": FAILED: %d problem%s in %s", len(r.Failures), plural(len(r.Failures)), strings.Join(tables, ", "))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Run restores the backup into a scratch directory, checks it on a private server
// and removes everything it made. The error is for a drill that could not run (the
// restore failed, the server did not start, an interruption); what the checks found is
// in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	rc := cfg.Restore
	t0 := time.Now()
	scratch, err := os.MkdirTemp(cfg.TmpDir, "ferry-drill-")
	if err != nil {
		return nil, setting.Errorf("%s: make a scratch directory: %w", setting.Tmpdir, err)
	}
	defer removeScratch(scratch, rc.Log)
	rc.Datadir = filepath.Join(scratch, "datadir")
	done, err := cfg.Open(&rc)
	if err != nil {
		return nil, err
	}
	defer done()
	recorded, err := inspect(ctx, rc)
	if err != nil {
		return nil, err
	}
	rep := &Report{PointInTime: rc.Replay != nil}
	rc.Discard = true
	if len(scratch) < 60 { // room for the server's run directory and its socket (108 bytes)
		rc.RunDir = scratch
	}
	rc.Export = func(ctx context.Context, db *sql.DB, _ string) error {
		rep.Restored = time.Since(t0)
		return cfg.check(ctx, db, recorded, rep)
	}
	res, err := restore.Restore(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("restore drill: %w", err)
	}
	rep.Backup = res.Backup.Origin()
	if m := res.Backup.Manifest; m != nil && m.ID != "" {
		rep.Backup = m.ID
	}
	rep.Took = time.Since(t0)
	return rep, nil
}

// inspect reads the backup before any data moves: it refuses a backup the drill
// cannot check, and returns the tables it recorded at its end point (none for a point
// in time, whose copy is past it).
func inspect(ctx context.Context, rc restore.Config) ([]mariadb.Table, error) {
	if !rc.Source.Caps().Inspect {
		return nil, nil
	}
	b, err := rc.Source.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	if b.IsMySQL() {
		return nil, fmt.Errorf("backup %s was taken from MySQL %s: the restore drill checks MariaDB backups only (ferry verify without it checks every page of this one)", b.Origin(), b.ServerVersion)
	}
	if b.Manifest == nil || rc.Replay != nil {
		return nil, nil
	}
	return b.Manifest.Tables, nil
}

// removeScratch removes the scratch directory, saying so if it cannot.
func removeScratch(dir string, log *slog.Logger) {
	if err := os.RemoveAll(dir); err != nil && log != nil {
		log.Error("the restore drill's scratch directory was not removed: remove it", "dir", dir, "err", err)
	}
}

// check runs the checks on the private server db and records what they find.
func (cfg Config) check(ctx context.Context, db *sql.DB, recorded []mariadb.Table, rep *Report) error {
	faultpoint.At(ctx, "drill-check", 1)
	found, err := mariadb.ListTables(ctx, db)
	if err != nil {
		return fmt.Errorf("restore drill: %w", err)
	}
	if len(recorded) > 0 {
		rep.Recorded = len(recorded)
		rep.Failures = append(rep.Failures, Compare(recorded, found)...)
	}
	sample := cfg.sample(found)
	var jobs []job
	for _, t := range found {
		jobs = append(jobs, job{table: t, checksum: sample[t.String()]})
	}
	results, err := runJobs(ctx, db, jobs, cfg.Parallel, cfg.Full)
	if err != nil {
		return err
	}
	for _, r := range results {
		rep.Checked++
		if r.checksummed {
			rep.Checksummed++
		}
		rep.Failures = append(rep.Failures, r.failures...)
	}
	slices.SortStableFunc(rep.Failures, func(a, b Failure) int { return strings.Compare(a.Table, b.Table) })
	if rc := cfg.Restore; rc.Log != nil {
		rc.Log.Info("restore drill: checked", "tables", rep.Checked, "checksummed", rep.Checksummed, "failures", len(rep.Failures))
	}
	return nil
}

// systemSchemas are checked (CHECK TABLE) but never picked for the sample: the sample
// is of the user's data.
var systemSchemas = map[string]bool{"mysql": true, "sys": true}

// sample picks the tables read whole: all with Full, else Sample user tables at
// random (each drill reads others, so that weekly drills cover a database in turn).
func (cfg Config) sample(found []mariadb.Table) map[string]bool {
	var user []mariadb.Table
	for _, t := range found {
		if cfg.Full || !systemSchemas[t.Schema] {
			user = append(user, t)
		}
	}
	if !cfg.Full {
		rand.Shuffle(len(user), func(i, j int) { user[i], user[j] = user[j], user[i] })
		user = user[:min(len(user), cfg.Sample)]
	}
	out := make(map[string]bool, len(user))
	for _, t := range user {
		out[t.String()] = true
	}
	return out
}

// errStopped is a drill stopped by its context.
var errStopped = errors.New("restore drill stopped")
