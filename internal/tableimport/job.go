package tableimport

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ferry-backup/ferry/internal/clock"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Options say which tables to restore and how.
type Options struct {
	Tables []Name
	// RenameTo restores the one table of Tables under this name ("t" in its database,
	// or "db.t") beside the live one.
	RenameTo string
	// Replace lets a restored table take the place of a live one of the same
	// definition; the live one is kept, renamed aside.
	Replace bool
	Log     *slog.Logger
}

// Job restores tables into one live server: New checks the targets before anything
// is restored, Export takes the tables out of the prepared copy, Import brings them in.
type Job struct {
	opt     Options
	live    *sql.DB
	datadir string   // the live server's
	work    string   // the exported files wait here, beside the live datadir
	journal *os.File // in work: what the import does on the live server (journal.go)
	dirty   bool     // a failed run left a table the journal names: keep the journal
	items   []*item
	clock   clock.Clock // when tables set aside are stamped
}

type item struct {
	from, to Name
	exists   bool   // to exists on the live server
	engine   string // lower case
	def      string // the backup's CREATE TABLE, without its name
	createDB string // CREATE DATABASE for a database the live server lacks
	files    []string
}

// Result is one restored table.
type Result struct {
	From, To Name
	Aside    *Name // the live table it replaced, kept under this name
}

// New checks the tables' targets on the live server: a live table is replaced only
// with Replace, and ferry must see the live datadir (it runs on the database host).
// It first finishes what a killed table restore into the same server left there.
func New(ctx context.Context, live *sql.DB, opt Options) (*Job, error) {
	j := &Job{opt: opt, live: live, clock: clock.Real{}}
	if opt.RenameTo != "" && len(opt.Tables) != 1 {
		return nil, setting.Errorf("%s names one table: restore one table with %s", setting.RenameTo, setting.Tables)
	}
	if err := live.QueryRowContext(ctx, "SELECT @@datadir").Scan(&j.datadir); err != nil {
		return nil, fmt.Errorf("read the server's datadir: %w", err)
	}
	if fi, err := os.Stat(j.datadir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the server's datadir %s is not here (%v): restore tables on the database host, as root or the mysql user", j.datadir, err)
	}
	if err := j.finishKilledRuns(ctx); err != nil {
		return nil, err
	}
	for _, from := range opt.Tables {
		it := &item{from: from, to: from}
		if opt.RenameTo != "" {
			to, err := ParseTarget(opt.RenameTo, from)
			if err != nil {
				return nil, err
			}
			it.to = to
		}
		var err error
		if it.exists, err = tableExists(ctx, live, it.to); err != nil {
			return nil, err
		}
		if it.exists && !opt.Replace {
			return nil, setting.Errorf("%s exists on the server: pass %s to replace it (it is kept, renamed aside) or %s NAME to restore beside it", it.to, setting.ReplaceTables, setting.RenameTo)
		}
		j.items = append(j.items, it)
	}
	if err := j.startWork(); err != nil {
		return nil, err
	}
	return j, nil
}

func tableExists(ctx context.Context, db *sql.DB, n Name) (bool, error) {
	var c int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", n.DB, n.Table).Scan(&c)
	if err != nil {
		return false, fmt.Errorf("look up %s on the server: %w", n, err)
	}
	return c > 0, nil
}

var autoInc = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// definition is SHOW CREATE TABLE without the table's name (from "(" on), and the
// same without its AUTO_INCREMENT counter, to compare definitions.
func definition(ctx context.Context, db *sql.DB, n Name) (def, cmpDef string, err error) {
	var name, create string
	if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+n.quoted()).Scan(&name, &create); err != nil {
		return "", "", err
	}
	i := strings.Index(create, "(")
	if i < 0 || !strings.HasPrefix(create, "CREATE TABLE ") {
		return "", "", fmt.Errorf("SHOW CREATE TABLE %s: unexpected %.40q", n, create)
	}
	return create[i:], autoInc.ReplaceAllString(create[i:], ""), nil
}

// Datadir is the live server's datadir.
func (j *Job) Datadir() string { return j.datadir }

// Close removes what Export left and Import did not take, and the journal unless a
// table it names could not be dropped (the next table restore drops it).
func (j *Job) Close() {
	if j.work != "" && !j.dirty {
		os.RemoveAll(j.work)
	} else if j.work != "" {
		ents, _ := os.ReadDir(j.work)
		for _, e := range ents {
			if e.Name() != journalFile {
				os.RemoveAll(filepath.Join(j.work, e.Name()))
			}
		}
	}
	if j.journal != nil {
		j.journal.Close()
	}
	j.live.Close()
}

// Wants names the backup's files a table restore needs: everything outside the
// databases (system and undo tablespaces, redo, logs, metadata), the mysql schema,
// and in the tables' databases their option file and the tables' own files (the
// definition, the tablespace or its partitions', DDL markers, DATA DIRECTORY links).
// The other tables' tablespaces are left in the backup.
func (j *Job) Wants(path string) bool {
	db, name, ok := strings.Cut(path, "/")
	if !ok || db == "mysql" {
		return true
	}
	if name == "db.opt" {
		return slices.ContainsFunc(j.items, func(it *item) bool { return it.from.DB == db })
	}
	return slices.ContainsFunc(j.items, func(it *item) bool { return it.from.owns(path) })
}

// owns tells whether path (db/name.ext, '/' separated) is one of the table's files: its
// definition, its tablespace or its partitions', an incremental's delta of them.
func (n Name) owns(path string) bool {
	db, name, ok := strings.Cut(path, "/")
	if !ok || db != n.DB {
		return false
	}
	stem, _, _ := strings.Cut(name, ".")
	return stem == n.Table || strings.HasPrefix(stem, n.Table+"#P#")
}

// importable are the extensions of the data files of the engines a table restore
// imports (an incremental holds an InnoDB tablespace as .ibd.delta).
var importable = []string{".ibd", ".ibd.delta", ".MAD", ".MYD"}

// otherEngines are the data files of engines a table restore does not import, by
// extension, to name the engine in the refusal.
var otherEngines = map[string]string{".CSV": "CSV", ".ARZ": "ARCHIVE"}

// CheckBackup refuses, before any data moves, a table the backup does not hold, or
// holds no InnoDB, Aria or MyISAM data file of: paths are the backup's files ('/'
// separated, relative to its datadir), and backup names it in the message. (A stream's
// files are known only as it is read: the export refuses such a table then.)
func (j *Job) CheckBackup(paths []string, backup string) error {
	var missing []string
	for _, it := range j.items {
		owned, data, engine := false, false, ""
		for _, p := range paths {
			if !it.from.owns(p) {
				continue
			}
			owned = true
			data = data || slices.ContainsFunc(importable, func(ext string) bool { return strings.HasSuffix(p, ext) })
			engine = cmp.Or(engine, otherEngines[filepath.Ext(p)])
		}
		switch {
		case !owned:
			missing = append(missing, it.from.String())
		case !data && engine != "":
			return fmt.Errorf("%s is a %s table: ferry restores InnoDB, Aria and MyISAM tables into a running server; restore the backup to a datadir and copy it from there", it.from, engine)
		case !data:
			return fmt.Errorf("the backup %s holds no InnoDB, Aria or MyISAM data file of %s (another engine, or left out of a partial backup): ferry restores only those tables into a running server; restore the backup to a datadir and copy it from there", backup, it.from)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s %s not in the backup %s: check the database and table names, or restore from a backup that holds them", strings.Join(missing, ", "), isAre(len(missing)), backup)
	}
	return nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
