package tableimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/filecopy"
)

// Import brings every exported table into the live server, each through a new table:
// it is created with the backup's definition, its tablespace discarded and replaced
// by the exported one (IMPORT TABLESPACE), and only then does it take the target's
// name, in one RENAME TABLE with the live table it replaces (kept aside). The
// statements are not written to the binary log: a replica has no tablespace to import.
func (j *Job) Import(ctx context.Context) ([]Result, error) {
	conn, err := j.live.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION sql_log_bin = 0", "SET SESSION foreign_key_checks = 0"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s on the server: %w", q, err)
		}
	}
	var out []Result
	for _, it := range j.items {
		r, err := j.importOne(ctx, conn, it)
		if err != nil {
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

func (j *Job) importOne(ctx context.Context, conn *sql.Conn, it *item) (Result, error) {
	res := Result{From: it.from, To: it.to}
	if it.createDB != "" {
		if _, err := conn.ExecContext(ctx, it.createDB); err != nil {
			return res, fmt.Errorf("create database %s: %w", it.to.DB, err)
		}
	}
	tmp := it.to
	if it.exists {
		tmp = Name{it.to.DB, shortName("ferry_new_", it.to.Table, "_"+j.now().Format("20060102150405"))}
	}
	faultpoint.At(ctx, "table-import", 1)
	if _, err := conn.ExecContext(ctx, "CREATE TABLE "+tmp.quoted()+" "+it.def); err != nil {
		return res, fmt.Errorf("create %s with the backup's definition: %w", tmp, err)
	}
	faultpoint.At(ctx, "table-import", 2)
	placed, err := j.fill(ctx, conn, it, tmp)
	if err != nil {
		for _, p := range placed {
			os.Remove(p)
		}
		if _, derr := conn.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+tmp.quoted()); derr != nil {
			err = fmt.Errorf("%w; drop the unfinished %s by hand: %v", err, tmp, derr)
		}
		return res, err
	}
	faultpoint.At(ctx, "table-import", 4)
	if !it.exists {
		return res, nil
	}
	old := Name{it.to.DB, shortName("", it.to.Table, "_ferry_old_"+j.now().Format("20060102150405"))}
	if _, err := conn.ExecContext(ctx, "RENAME TABLE "+it.to.quoted()+" TO "+old.quoted()+", "+tmp.quoted()+" TO "+it.to.quoted()); err != nil {
		return res, fmt.Errorf("swap the restored table in (it is complete as %s; the live one untouched): %w", tmp, err)
	}
	faultpoint.At(ctx, "table-import", 5)
	res.Aside = &old
	return res, nil
}

// fill gives tmp the exported tablespaces: its own, or each partition's.
func (j *Job) fill(ctx context.Context, conn *sql.Conn, it *item, tmp Name) ([]string, error) {
	parts, err := partitions(it)
	if err != nil {
		return nil, err
	}
	if it.engine != "innodb" {
		if len(parts) > 0 {
			return nil, fmt.Errorf("%s is a partitioned %s table: only partitioned InnoDB tables are restored into a running server so far", it.from, it.engine)
		}
		return j.copyInto(ctx, conn, tmp, it.files, it.from.Table)
	}
	if len(parts) == 0 {
		return j.importInto(ctx, conn, tmp, it.files, it.from.Table)
	}
	// MariaDB 10.11 discards and imports whole tables only: each partition goes
	// through a plain table of the same columns, exchanged into place.
	for _, p := range parts {
		x := Name{tmp.DB, shortName("ferry_part_", p, "_"+j.now().Format("150405"))}
		for _, q := range []string{"CREATE TABLE " + x.quoted() + " LIKE " + tmp.quoted(), "ALTER TABLE " + x.quoted() + " REMOVE PARTITIONING"} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return nil, fmt.Errorf("partition %s of %s: %s: %w", p, it.from, q, err)
			}
		}
		var files []string
		for _, f := range it.files {
			if strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)) == it.from.Table+"#P#"+p {
				files = append(files, f)
			}
		}
		placed, err := j.importInto(ctx, conn, x, files, it.from.Table+"#P#"+p)
		if err == nil {
			_, err = conn.ExecContext(ctx, "ALTER TABLE "+tmp.quoted()+" EXCHANGE PARTITION `"+p+"` WITH TABLE "+x.quoted())
		}
		conn.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+x.quoted())
		if err != nil {
			return placed, fmt.Errorf("partition %s of %s: %w", p, it.from, err)
		}
	}
	return nil, nil
}

// copyInto puts an Aria or MyISAM table's exported files in place of the new table
// t's empty ones, with t locked and closed meanwhile (LOCK TABLES, FLUSH TABLES).
// Aria zero-fills a table moved from another server when it first opens it.
func (j *Job) copyInto(ctx context.Context, conn *sql.Conn, t Name, files []string, stem string) ([]string, error) {
	for _, q := range []string{"LOCK TABLES " + t.quoted() + " WRITE", "FLUSH TABLES " + t.quoted()} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s on the server: %w", q, err)
		}
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
	dir := filepath.Join(j.datadir, t.DB)
	uid, gid, err := owner(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		dst := filepath.Join(dir, t.Table+strings.TrimPrefix(filepath.Base(f), stem))
		if _, err := os.Lstat(dst); err != nil {
			return nil, fmt.Errorf("the new %s has no %s to replace: %w", t, filepath.Base(dst), err)
		}
		if err := replaceFile(ctx, f, dst, uid, gid); err != nil {
			return nil, err
		}
	}
	if _, err := conn.ExecContext(ctx, "FLUSH TABLES "+t.quoted()); err != nil {
		return nil, fmt.Errorf("FLUSH TABLES %s on the server: %w", t, err)
	}
	if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		return nil, fmt.Errorf("UNLOCK TABLES on the server: %w", err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.quoted()).Scan(&n); err != nil {
		return nil, fmt.Errorf("the server cannot read the restored %s: %w", t, err)
	}
	return nil, nil
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
// "t#P#p0") in its place and imports them; it returns the files it placed.
func (j *Job) importInto(ctx context.Context, conn *sql.Conn, t Name, files []string, stem string) ([]string, error) {
	if _, err := conn.ExecContext(ctx, "ALTER TABLE "+t.quoted()+" DISCARD TABLESPACE"); err != nil {
		return nil, fmt.Errorf("discard the tablespace of the new %s: %w", t, err)
	}
	dir := filepath.Join(j.datadir, t.DB)
	uid, gid, err := owner(dir)
	if err != nil {
		return nil, err
	}
	var placed, cfgs []string
	for _, f := range files {
		dst := filepath.Join(dir, t.Table+strings.TrimPrefix(filepath.Base(f), stem))
		if err := place(ctx, f, dst, uid, gid); err != nil {
			return placed, err
		}
		placed = append(placed, dst)
		if filepath.Ext(dst) == ".cfg" {
			cfgs = append(cfgs, dst)
		}
	}
	faultpoint.At(ctx, "table-import", 3)
	if _, err := conn.ExecContext(ctx, "ALTER TABLE "+t.quoted()+" IMPORT TABLESPACE"); err != nil {
		return placed, fmt.Errorf("import the exported tablespace into %s: %w", t, err)
	}
	for _, c := range cfgs {
		os.Remove(c)
	}
	return nil, nil
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
