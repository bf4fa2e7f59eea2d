package tableimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/filecopy"
)

// Import brings every exported table into the live server, each through a new table
// of a name of ferry's (ferry_new_TABLE): it is created with the backup's definition,
// its tablespace discarded and replaced by the exported one (IMPORT TABLESPACE), and
// only then does it take the target's name, in one RENAME TABLE with the live table it
// replaces (kept aside). The target is the old table or the complete new one at every
// instant. Each step is in the journal before it is taken: a run killed on the way
// leaves what the next one drops; an interrupted one drops it itself. The statements
// are not written to the binary log: a replica has no tablespace to import.
func (j *Job) Import(ctx context.Context) ([]Result, error) {
	conn, err := j.session(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out []Result
	for _, it := range j.items {
		r, err := j.importOne(ctx, conn, it)
		if err != nil {
			if ctx.Err() != nil && !j.dirty {
				state := "is as it was"
				if !it.exists {
					state = "was not made"
				}
				err = fmt.Errorf("%w; %s %s, and nothing of its restore is left on the server", err, it.to, state)
			}
			return out, err
		}
		out = append(out, r)
		j.opt.Log.Info("table restored", "from", it.from.String(), "to", it.to.String(), "replaced_kept_as", aside(r))
	}
	return out, nil
}

func aside(r Result) string {
	if r.Aside == nil {
		return ""
	}
	return r.Aside.String()
}

// Prefixes of the names of the tables a table restore creates on the live server.
const (
	newPrefix  = "ferry_new_"
	partPrefix = "ferry_part_"
)

// ferryName is prefix+table within MariaDB's 64-character limit: a longer table name
// is cut and given a hash of itself, so that the name stays one per table.
func ferryName(prefix, table string) string {
	if len(prefix)+len(table) <= 64 {
		return prefix + table
	}
	h := fnv.New32a()
	h.Write([]byte(table))
	return shortName(prefix, table, fmt.Sprintf("_%08x", h.Sum32()))
}

// run executes q on conn unless ctx has ended. A statement sent runs to its end: cut
// short on the client, a DDL would leave the server in a state ferry does not know.
func run(ctx context.Context, conn *sql.Conn, q string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := conn.ExecContext(context.WithoutCancel(ctx), q)
	return err
}

func (j *Job) importOne(ctx context.Context, conn *sql.Conn, it *item) (Result, error) {
	res := Result{From: it.from, To: it.to}
	if it.createDB != "" {
		if err := j.note(noteDatabase, Name{it.to.DB, ""}); err != nil {
			return res, err
		}
		if err := run(ctx, conn, it.createDB); err != nil {
			return res, fmt.Errorf("create database %s: %w", it.to.DB, err)
		}
	}
	tmp := Name{it.to.DB, ferryName(newPrefix, it.to.Table)}
	// A table of that name no journal names is not ferry's to drop.
	exists, err := tableExists(ctx, j.live, tmp)
	if err == nil && exists {
		err = fmt.Errorf("%s exists on the server, and no journal of a killed table restore names it: if an earlier restore left it, DROP it; else rename it, and run the restore again", tmp)
	}
	if err == nil {
		err = j.note(noteTable, tmp)
	}
	if err != nil {
		return res, err
	}
	faultpoint.At(ctx, "table-import", 1)
	if err := run(ctx, conn, "CREATE TABLE "+tmp.quoted()+" "+it.def); err != nil {
		return res, j.undo(ctx, it, tmp, fmt.Errorf("create %s with the backup's definition: %w", tmp, err))
	}
	faultpoint.At(ctx, "table-import", 2)
	if err := j.fill(ctx, conn, it, tmp); err != nil {
		return res, j.undo(ctx, it, tmp, err)
	}
	faultpoint.At(ctx, "table-import", 4)
	aside, err := j.putInPlace(ctx, conn, it, tmp)
	if err != nil {
		return res, j.undo(ctx, it, tmp, err)
	}
	res.Aside = aside
	faultpoint.At(ctx, "table-import", 5)
	return res, nil
}

// putInPlace gives the complete table tmp the target's name, with the live table it
// replaces renamed aside in the same statement: the server takes both names before it
// renames either, so that the target is never missing. It returns the aside name.
func (j *Job) putInPlace(ctx context.Context, conn *sql.Conn, it *item, tmp Name) (*Name, error) {
	if !it.exists {
		if err := run(ctx, conn, "RENAME TABLE "+tmp.quoted()+" TO "+it.to.quoted()); err != nil {
			return nil, fmt.Errorf("put the restored table in place as %s: %w", it.to, err)
		}
		return nil, nil
	}
	old, err := j.asideName(ctx, it.to)
	if err == nil {
		err = j.note(noteSwap, it.to, old)
	}
	if err != nil {
		return nil, err
	}
	if err := run(ctx, conn, "RENAME TABLE "+it.to.quoted()+" TO "+old.quoted()+", "+tmp.quoted()+" TO "+it.to.quoted()); err != nil {
		return nil, fmt.Errorf("put the restored table in place of %s: %w", it.to, err)
	}
	return &old, nil
}

// asideName is a free name for the live table t kept aside: t_ferry_old_TIME, with a
// counter if a table has that name already (two replaces within a second).
func (j *Job) asideName(ctx context.Context, t Name) (Name, error) {
	stamp := "_ferry_old_" + j.clock.Now().Format("20060102150405")
	for i := 1; ; i++ {
		n := Name{t.DB, shortName("", t.Table, stamp)}
		taken, err := tableExists(ctx, j.live, n)
		if err != nil || !taken {
			return n, err
		}
		stamp = fmt.Sprintf("_ferry_old_%s_%d", j.clock.Now().Format("20060102150405"), i)
	}
}

// undo drops the unfinished table tmp and its files (and a database created for it
// that holds nothing else), even when ctx has ended; if that fails, the journal is
// kept for the next run, and the message says so.
func (j *Job) undo(ctx context.Context, it *item, tmp Name, cause error) error {
	ctx = context.WithoutCancel(ctx)
	_, err := j.dropLeftover(ctx, tmp)
	if err == nil && it.createDB != "" {
		err = j.dropEmptyDB(ctx, it.to.DB)
	}
	if err != nil {
		j.dirty = true
		return fmt.Errorf("%w; the unfinished %s is left on the server (%v): the next table restore into this server drops it, or DROP it yourself", cause, tmp, err)
	}
	return cause
}

// fill gives tmp the exported tablespaces: its own, or each partition's.
func (j *Job) fill(ctx context.Context, conn *sql.Conn, it *item, tmp Name) error {
	parts, err := partitions(it)
	if err != nil {
		return err
	}
	if it.engine != "innodb" {
		if len(parts) > 0 {
			return fmt.Errorf("%s is a partitioned %s table: only partitioned InnoDB tables are restored into a running server so far", it.from, it.engine)
		}
		return j.copyInto(ctx, conn, tmp, it.files, it.from.Table)
	}
	if len(parts) == 0 {
		return j.importInto(ctx, conn, tmp, it.files, it.from.Table)
	}
	// MariaDB 10.11 discards and imports whole tables only: each partition goes
	// through a plain table of the same columns, exchanged into place.
	for _, p := range parts {
		if err := j.fillPartition(ctx, conn, it, tmp, p); err != nil {
			return fmt.Errorf("partition %s of %s: %w", p, it.from, err)
		}
	}
	return nil
}

// fillPartition imports partition p of tmp through a plain table of its columns, which
// it then drops (with its files, whatever happened).
func (j *Job) fillPartition(ctx context.Context, conn *sql.Conn, it *item, tmp Name, p string) (err error) {
	x := Name{tmp.DB, ferryName(partPrefix, p)}
	if err := j.note(noteTable, x); err != nil {
		return err
	}
	defer func() {
		if _, derr := j.dropLeftover(context.WithoutCancel(ctx), x); derr != nil && err == nil {
			err = derr
		}
	}()
	for _, q := range []string{"CREATE TABLE " + x.quoted() + " LIKE " + tmp.quoted(), "ALTER TABLE " + x.quoted() + " REMOVE PARTITIONING"} {
		if err := run(ctx, conn, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	var files []string
	for _, f := range it.files {
		if strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)) == it.from.Table+"#P#"+p {
			files = append(files, f)
		}
	}
	if err := j.importInto(ctx, conn, x, files, it.from.Table+"#P#"+p); err != nil {
		return err
	}
	return run(ctx, conn, "ALTER TABLE "+tmp.quoted()+" EXCHANGE PARTITION `"+p+"` WITH TABLE "+x.quoted())
}

// copyInto puts an Aria or MyISAM table's exported files in place of the new table
// t's empty ones, with t locked and closed meanwhile (LOCK TABLES, FLUSH TABLES).
// Aria zero-fills a table moved from another server when it first opens it.
func (j *Job) copyInto(ctx context.Context, conn *sql.Conn, t Name, files []string, stem string) error {
	for _, q := range []string{"LOCK TABLES " + t.quoted() + " WRITE", "FLUSH TABLES " + t.quoted()} {
		if err := run(ctx, conn, q); err != nil {
			return fmt.Errorf("%s on the server: %w", q, err)
		}
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
	dir := filepath.Join(j.datadir, t.DB)
	uid, gid, err := owner(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		dst := filepath.Join(dir, t.Table+strings.TrimPrefix(filepath.Base(f), stem))
		if _, err := os.Lstat(dst); err != nil {
			return fmt.Errorf("the new %s has no %s to replace: %w", t, filepath.Base(dst), err)
		}
		if err := replaceFile(ctx, f, dst, uid, gid); err != nil {
			return err
		}
	}
	if err := run(ctx, conn, "FLUSH TABLES "+t.quoted()); err != nil {
		return fmt.Errorf("FLUSH TABLES %s on the server: %w", t, err)
	}
	if err := run(ctx, conn, "UNLOCK TABLES"); err != nil {
		return fmt.Errorf("UNLOCK TABLES on the server: %w", err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.quoted()).Scan(&n); err != nil {
		return fmt.Errorf("the server cannot read the restored %s: %w", t, err)
	}
	return nil
}

// replaceFile puts src in place of dst (a rename on the same file system, else a copy
// beside it renamed over), with the given owner.
func replaceFile(ctx context.Context, src, dst string, uid, gid int) error {
	tmp := dst + ".ferry-new"
	if err := os.Rename(src, tmp); err != nil {
		if _, _, err := filecopy.CopyPlain(ctx, src, tmp, nil); err != nil {
			return fmt.Errorf("put %s in the server's datadir: %w", filepath.Base(dst), err)
		}
	}
	if err := os.Chown(tmp, uid, gid); err != nil && !errors.Is(err, syscall.EPERM) {
		os.Remove(tmp)
		return fmt.Errorf("chown %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put %s in the server's datadir: %w", filepath.Base(dst), err)
	}
	return nil
}

// partitions lists the partitions of an exported table (none if it has none).
func partitions(it *item) ([]string, error) {
	var out []string
	for _, f := range it.files {
		base := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		_, p, ok := strings.Cut(base, "#P#")
		if !ok || filepath.Ext(f) != ".ibd" {
			continue
		}
		if !plainName.MatchString(p) {
			return nil, fmt.Errorf("%s: partition %q: subpartitions and partition names other than letters, digits and '_' are not supported yet", it.from, p)
		}
		out = append(out, p)
	}
	return out, nil
}

// importInto discards t's tablespace, puts the exported files of stem (e.g. "t" or
// "t#P#p0") in its place and imports them.
func (j *Job) importInto(ctx context.Context, conn *sql.Conn, t Name, files []string, stem string) error {
	if err := run(ctx, conn, "ALTER TABLE "+t.quoted()+" DISCARD TABLESPACE"); err != nil {
		return fmt.Errorf("discard the tablespace of the new %s: %w", t, err)
	}
	dir := filepath.Join(j.datadir, t.DB)
	uid, gid, err := owner(dir)
	if err != nil {
		return err
	}
	var cfgs []string
	for _, f := range files {
		dst := filepath.Join(dir, t.Table+strings.TrimPrefix(filepath.Base(f), stem))
		if err := place(ctx, f, dst, uid, gid); err != nil {
			return err
		}
		if filepath.Ext(dst) == ".cfg" {
			cfgs = append(cfgs, dst)
		}
	}
	faultpoint.At(ctx, "table-import", 3)
	if err := run(ctx, conn, "ALTER TABLE "+t.quoted()+" IMPORT TABLESPACE"); err != nil {
		return fmt.Errorf("import the exported tablespace into %s: %w", t, err)
	}
	for _, c := range cfgs {
		os.Remove(c)
	}
	return nil
}

// place moves an exported file into the live datadir (renamed if on the same file
// system, else copied) and gives it the database directory's owner.
func place(ctx context.Context, src, dst string, uid, gid int) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists in the server's datadir: a file the server does not know; move it away first", dst)
	}
	if err := os.Rename(src, dst); err != nil {
		if _, _, err := filecopy.CopyPlain(ctx, src, dst, nil); err != nil {
			return fmt.Errorf("put %s in the server's datadir: %w", filepath.Base(dst), err)
		}
	}
	if err := os.Chown(dst, uid, gid); err != nil && !errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("chown %s: %w", dst, err)
	}
	return nil
}

func owner(dir string) (int, int, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("the server's database directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return os.Getuid(), os.Getgid(), nil
	}
	return int(st.Uid), int(st.Gid), nil
}

// shortName is prefix+table+suffix within MariaDB's 64-character limit (the table
// part is cut).
func shortName(prefix, table, suffix string) string {
	room := 64 - len(prefix) - len(suffix)
	if len(table) > room {
		table = table[:room]
	}
	return prefix + table + suffix
}
