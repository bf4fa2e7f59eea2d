package tableimport

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A table restore keeps its work in one directory per live server, beside its datadir:
// the exported files, and a journal of what it is about to do on the live server (each
// table it creates, each live table it moves aside), written before it is done and
// locked while the run lasts. A run killed on the way (SIGKILL, a crash) leaves both;
// the next table restore into the same server finds them, drops the tables the killed
// run created, removes their files, says where a live table it replaced was kept, and
// removes the directory. Only names the journal holds are dropped: never a user table.

const journalFile = "journal"

// Journal entries: a table (or database) ferry creates, and a live table moved aside.
const (
	noteTable    = "table"
	noteDatabase = "database"
	noteSwap     = "swap"
)

// workDirs are where a table restore into the server of datadir works: beside the
// datadir, else (its parent not writable) in the temporary directory.
func workDirs(datadir string) []string {
	clean := filepath.Clean(datadir)
	h := fnv.New32a()
	h.Write([]byte(clean))
	return []string{
		filepath.Join(filepath.Dir(clean), "."+filepath.Base(clean)+".ferry-tables"),
		filepath.Join(os.TempDir(), fmt.Sprintf("ferry-tables-%08x", h.Sum32())),
	}
}

// finishKilledRuns finishes what a killed table restore into this server left.
func (j *Job) finishKilledRuns(ctx context.Context) error {
	for _, d := range workDirs(j.datadir) {
		if err := j.finishKilled(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// startWork makes the work directory and its journal, locked until Close.
func (j *Job) startWork() error {
	var errs []error
	for _, d := range workDirs(j.datadir) {
		if err := os.Mkdir(d, 0o750); err != nil {
			errs = append(errs, err)
			continue
		}
		f, err := os.OpenFile(filepath.Join(d, journalFile), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o640)
		if err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		}
		if err != nil {
			os.RemoveAll(d)
			return fmt.Errorf("the table restore's journal in %s: %w", d, err)
		}
		j.work, j.journal = d, f
		return nil
	}
	return fmt.Errorf("a work directory for the table restore: %w", errors.Join(errs...))
}

// note writes one journal entry, on disk before the step it announces.
func (j *Job) note(kind string, names ...Name) error {
	line := kind
	for _, n := range names {
		line += "\t" + n.DB + "\t" + n.Table
	}
	if _, err := j.journal.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("the table restore's journal: %w", err)
	}
	if err := j.journal.Sync(); err != nil {
		return fmt.Errorf("the table restore's journal: %w", err)
	}
	return nil
}

// finishKilled undoes what the journal in dir says a killed run left on the server,
// then removes dir. A journal another run holds locked refuses.
func (j *Job) finishKilled(ctx context.Context, dir string) error {
	f, err := os.Open(filepath.Join(dir, journalFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil
		}
		return j.removeWork(dir) // killed before its journal was made: exported files only
	}
	if err != nil {
		return fmt.Errorf("the journal of an earlier table restore: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another table restore into this server is running (its work directory is %s): wait for it to end", dir)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if err := j.undoEntry(ctx, strings.Split(sc.Text(), "\t")); err != nil {
			return fmt.Errorf("finish the table restore killed before (journal %s): %w", f.Name(), err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("the journal of an earlier table restore: %w", err)
	}
	return j.removeWork(dir)
}

func (j *Job) removeWork(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the work directory of an earlier table restore: %w", err)
	}
	j.opt.Log.Warn("removed the work directory of a table restore killed before", "dir", dir)
	return nil
}

// undoEntry acts on one journal entry of a killed run: a table it created is dropped
// (it was never renamed into place, or the name would be free), and its files with it;
// a database it created is dropped if it holds nothing; a swap that happened is told.
func (j *Job) undoEntry(ctx context.Context, e []string) error {
	switch {
	case len(e) == 3 && e[0] == noteTable:
		t := Name{e[1], e[2]}
		if t.check() != nil || !ferryMade(t.Table) {
			return fmt.Errorf("entry %q is not a table ferry names", strings.Join(e, " "))
		}
		dropped, err := j.dropLeftover(ctx, t)
		if err == nil && dropped {
			j.opt.Log.Warn("dropped a table a killed table restore left unfinished", "table", t.String())
		}
		return err
	case len(e) == 3 && e[0] == noteDatabase:
		return j.dropEmptyDB(ctx, e[1])
	case len(e) == 5 && e[0] == noteSwap:
		to, old := Name{e[1], e[2]}, Name{e[3], e[4]}
		kept, err := tableExists(ctx, j.live, old)
		if err == nil && kept {
			j.opt.Log.Warn("a killed table restore had replaced a table: the table it replaced is kept aside (DROP it when satisfied)", "table", to.String(), "kept_as", old.String())
		}
		return err
	}
	return fmt.Errorf("unknown entry %q", strings.Join(e, " "))
}

// ferryMade tells the names of the tables a table restore creates.
func ferryMade(table string) bool {
	return strings.HasPrefix(table, newPrefix) || strings.HasPrefix(table, partPrefix)
}

// session is a connection to the live server whose statements stay off the binary log
// (a replica has no tablespace to import) and skip foreign key checks.
func (j *Job) session(ctx context.Context) (*sql.Conn, error) {
	conn, err := j.live.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range []string{"SET SESSION sql_log_bin = 0", "SET SESSION foreign_key_checks = 0"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s on the server: %w", q, err)
		}
	}
	return conn, nil
}

// dropLeftover drops the table t that a table restore created and did not finish, and
// removes the files of its name in the live datadir (a staged tablespace, .cfg, or
// Aria/MyISAM file the server does not know). It says whether the table existed.
func (j *Job) dropLeftover(ctx context.Context, t Name) (bool, error) {
	exists, err := tableExists(ctx, j.live, t)
	if err != nil {
		return false, err
	}
	if exists {
		conn, err := j.session(ctx)
		if err != nil {
			return true, err
		}
		_, err = conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+t.quoted())
		conn.Close()
		if err != nil {
			return true, fmt.Errorf("drop %s: %w", t, err)
		}
	}
	dir := filepath.Join(j.datadir, t.DB)
	for _, pattern := range []string{t.Table + ".*", t.Table + "#P#*"} {
		files, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range files {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return exists, fmt.Errorf("remove %s: %w", f, err)
			}
		}
	}
	return exists, nil
}

// dropEmptyDB drops a database ferry created for a table it did not finish, if the
// database holds no table and no file but its db.opt.
func (j *Job) dropEmptyDB(ctx context.Context, db string) error {
	if !plainName.MatchString(db) {
		return fmt.Errorf("database %q is not a name ferry writes", db)
	}
	ents, err := os.ReadDir(filepath.Join(j.datadir, db))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || len(ents) > 1 || (len(ents) == 1 && ents[0].Name() != "db.opt") {
		return err // not empty: kept
	}
	var n int
	if err := j.live.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", db).Scan(&n); err != nil || n > 0 {
		return err
	}
	conn, err := j.session(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+db+"`"); err != nil {
		return fmt.Errorf("drop the empty database %s: %w", db, err)
	}
	j.opt.Log.Warn("dropped the empty database a table restore created and did not fill", "database", db)
	return nil
}
