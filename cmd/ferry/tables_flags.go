package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/tableimport"
	"github.com/spf13/pflag"
)

// tableFlags are restore's flags for bringing tables back into a running server.
type tableFlags struct {
	tables   string
	into     bool
	renameTo string
	replace  bool
	conn     mariadb.ConnConfig
}

// add declares them.
func (tf *tableFlags) add(f *pflag.FlagSet) {
	f.StringVar(&tf.tables, "tables", "", "with --into-server: restore these tables (InnoDB, Aria, MyISAM), 'db.t1,db.t2', into the running server (the backup is prepared aside, the tables exported and imported)")
	f.BoolVar(&tf.into, "into-server", false, "restore --tables into the server named by the connection options (--socket, --user, ...; ferry runs on its host)")
	f.StringVar(&tf.renameTo, "rename-to", "", "restore the one table of --tables under this name (NAME or db.NAME), beside the live table")
	f.BoolVar(&tf.replace, "replace-tables", false, "a restored table replaces a live one of the same definition; the live one is kept, renamed TABLE_ferry_old_TIME")
	addConnFlags(f, &tf.conn)
}

// set says whether a table restore was asked for.
func (tf *tableFlags) set() bool {
	return tf.tables != "" || tf.into || tf.renameTo != "" || tf.replace
}

// start checks the flags and the live server, and turns cfg into a table restore:
// the backup is restored and prepared in a scratch directory beside the live datadir,
// which the tables leave for the live server. finish imports them.
func (tf *tableFlags) start(ctx context.Context, cfg *restore.Config, g *globals) (*tableimport.Job, error) {
	switch {
	case tf.tables == "" || !tf.into:
		return nil, usageErr("--tables with --into-server restores tables into a running server; both are needed (with --rename-to or --replace-tables if you like)")
	case cfg.Datadir != "":
		return nil, usageErr("--into-server restores tables into the running server: --datadir does not apply")
	case cfg.Galera || cfg.FromSource || cfg.Replace:
		return nil, usageErr("--galera, --replicate-from-source and --replace apply to a whole datadir, not to --tables")
	}
	names, err := tableimport.ParseList(tf.tables)
	if err != nil {
		return nil, err
	}
	conn, err := tf.conn.Resolve()
	if err != nil {
		return nil, err
	}
	db, err := mariadb.Open(ctx, conn)
	if err != nil {
		return nil, err
	}
	job, err := tableimport.New(ctx, db, tableimport.Options{Tables: names, RenameTo: tf.renameTo, Replace: tf.replace, Log: g.log})
	if err != nil {
		db.Close()
		return nil, err
	}
	// A fixed name: a repository restore's staging directory is named after it, and
	// --resume finds it again (the copy is never swapped in; nothing is made there).
	cfg.Datadir = filepath.Join(filepath.Dir(filepath.Clean(job.Datadir())), "ferry-table-restore")
	cfg.Export, cfg.Want = job.Export, job.Wants
	return job, nil
}

// checkInBackup refuses, before any data moves, tables the backup does not hold. A
// stream's files are known only as it is read, and a point-in-time restore may replay
// a table's creation: those are checked on the prepared copy, as before.
func checkInBackup(ctx context.Context, cfg *restore.Config, job *tableimport.Job) error {
	if cfg.Replay != nil || !cfg.Source.Caps().Inspect {
		return nil
	}
	b, err := cfg.Source.Inspect(ctx)
	if err != nil {
		return err
	}
	paths, err := b.Paths()
	if err != nil {
		return err
	}
	return job.CheckBackup(paths, b.Origin())
}

// printTables tells what was restored where.
func printTables(w io.Writer, res *restore.Result, out []tableimport.Result) {
	for _, r := range out {
		line := fmt.Sprintf("Restored %s into %s", r.From, r.To)
		if r.Aside != nil {
			line += fmt.Sprintf("; the table it replaced is kept as %s (DROP it when satisfied)", r.Aside)
		}
		fmt.Fprintln(w, line+".")
	}
	fmt.Fprintf(w, "The tables are as of the backup's position: binlog %s:%d, GTID %s.\n", res.Coordinates.BinlogFile, res.Coordinates.BinlogPos, res.Coordinates.ReplicaGTID())
}
