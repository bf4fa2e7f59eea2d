package tableimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Export reads each table's definition on the private server running on the prepared
// copy in copyDir, checks it against the live server, and with FLUSH TABLES ... FOR
// EXPORT holding them takes their tablespaces and .cfg files out of the copy, into a
// work directory beside the live datadir.
func (j *Job) Export(ctx context.Context, priv *sql.DB, copyDir string) error {
	for _, it := range j.items {
		if err := j.check(ctx, priv, it); err != nil {
			return err
		}
	}
	conn, err := priv.Conn(ctx)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer conn.Close()
	var names []string
	for _, it := range j.items {
		names = append(names, it.from.quoted())
	}
	if _, err := conn.ExecContext(ctx, "FLUSH TABLES "+strings.Join(names, ", ")+" FOR EXPORT"); err != nil {
		return fmt.Errorf("FLUSH TABLES ... FOR EXPORT on the restored copy: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
	for _, it := range j.items {
		if err := j.take(ctx, copyDir, it); err != nil {
			return err
		}
	}
	return nil
}

// check reads the table's definition in the backup and refuses what cannot be
// imported: a table the backup lacks, another engine, a live table of another
// definition.
func (j *Job) check(ctx context.Context, priv *sql.DB, it *item) error {
	var engine string
	err := priv.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", it.from.DB, it.from.Table).Scan(&engine)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s is not in the backup", it.from)
	}
	if err != nil {
		return fmt.Errorf("look up %s in the backup: %w", it.from, err)
	}
	it.engine = strings.ToLower(engine)
	if dataExts[it.engine] == nil {
		return fmt.Errorf("%s is a %s table: ferry restores InnoDB, Aria and MyISAM tables into a running server; restore the backup to a datadir and copy it from there", it.from, engine)
	}
	def, cmpDef, err := definition(ctx, priv, it.from)
	if err != nil {
		return fmt.Errorf("definition of %s in the backup: %w", it.from, err)
	}
	it.def = def
	if it.exists {
		_, live, err := definition(ctx, j.live, it.to)
		if err != nil {
			return fmt.Errorf("definition of %s on the server: %w", it.to, err)
		}
		if live != cmpDef {
			return setting.Errorf("%s on the server is not defined as %s in the backup (its schema changed since): restore it beside with %s NAME and move the rows yourself", it.to, it.from, setting.RenameTo)
		}
	}
	var dbs int
	if err := j.live.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", it.to.DB).Scan(&dbs); err != nil {
		return fmt.Errorf("look up database %s on the server: %w", it.to.DB, err)
	}
	if dbs == 0 {
		var name, create string
		if err := priv.QueryRowContext(ctx, "SHOW CREATE DATABASE `"+it.from.DB+"`").Scan(&name, &create); err != nil {
			return fmt.Errorf("definition of database %s in the backup: %w", it.from.DB, err)
		}
		// IF NOT EXISTS: two tables may go into the same new database.
		it.createDB = strings.Replace(create, "CREATE DATABASE `"+it.from.DB+"`", "CREATE DATABASE IF NOT EXISTS `"+it.to.DB+"`", 1)
	}
	return nil
}

// dataExts are the files that hold a table's rows and indexes, by engine: what a
// table restore carries from the copy to the live server.
var dataExts = map[string][]string{"innodb": {".ibd", ".cfg"}, "aria": {".MAD", ".MAI"}, "myisam": {".MYD", ".MYI"}}

// take links (or copies) the exported table's files out of the copy: its .ibd and
// .cfg, or every partition's; an Aria or MyISAM table's data and index files.
func (j *Job) take(ctx context.Context, copyDir string, it *item) error {
	dir := filepath.Join(copyDir, it.from.DB)
	var files []string
	for _, ext := range dataExts[it.engine] {
		for _, pattern := range []string{it.from.Table + ext, it.from.Table + "#P#*" + ext} {
			m, _ := filepath.Glob(filepath.Join(dir, pattern))
			files = append(files, m...)
		}
	}
	if len(files) < 2 {
		return fmt.Errorf("export of %s left no data and index files (%s) in the copy (%d files)", it.from, strings.Join(dataExts[it.engine], ", "), len(files))
	}
	out := filepath.Join(j.work, it.from.DB+"."+it.from.Table)
	if err := os.Mkdir(out, 0o750); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, f := range files {
		dst := filepath.Join(out, filepath.Base(f))
		if err := os.Link(f, dst); err != nil {
			if _, _, err := filecopy.CopyPlain(ctx, f, dst, nil); err != nil {
				return fmt.Errorf("export %s: %w", f, err)
			}
		}
		it.files = append(it.files, dst)
	}
	return nil
}
