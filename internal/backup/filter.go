package backup

import (
	"regexp"
	"strings"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Filter selects the tables of a partial backup (--databases, --tables, --exclude, as
// mariadb-backup takes them). The system tablespaces and the system schemas are always
// copied: a restored partial datadir must start.
type Filter struct {
	databases map[string]bool // "db" or "db.table"; empty: every database
	tables    *regexp.Regexp  // on "db.table"
	exclude   *regexp.Regexp  // on "db.table" and on "db"
	spec      manifest.Partial
}

// systemSchemas are always in a backup.
var systemSchemas = map[string]bool{"mysql": true, "performance_schema": true, "sys": true}

// NewFilter reads the three options; all empty is no filter (nil).
func NewFilter(databases, tables, exclude string) (*Filter, error) {
	if databases == "" && tables == "" && exclude == "" {
		return nil, nil
	}
	f := &Filter{databases: map[string]bool{}}
	for _, d := range strings.FieldsFunc(databases, func(r rune) bool { return r == ' ' || r == ',' }) {
		if strings.Count(d, ".") > 1 || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || strings.ContainsAny(d, "/\\") {
			return nil, setting.Errorf("%s %q: give databases and database.table names", setting.Databases, d)
		}
		f.databases[d] = true
		f.spec.Databases = append(f.spec.Databases, d)
	}
	var err error
	if tables != "" {
		if f.tables, err = regexp.Compile(tables); err != nil {
			return nil, setting.Errorf("%s %q is not a regular expression: %w", setting.Tables, tables, err)
		}
		f.spec.Tables = tables
	}
	if exclude != "" {
		if f.exclude, err = regexp.Compile(exclude); err != nil {
			return nil, setting.Errorf("%s %q is not a regular expression: %w", setting.Exclude, exclude, err)
		}
		f.spec.Exclude = exclude
	}
	if len(f.databases) == 0 && f.tables == nil && f.exclude == nil {
		return nil, setting.Errorf("%s: name at least one database", setting.Databases)
	}
	return f, nil
}

// Spec is the selection, for the manifest.
func (f *Filter) Spec() *manifest.Partial { s := f.spec; return &s }

// includes tells whether table of db is backed up.
func (f *Filter) includes(db, table string) bool {
	if f == nil || systemSchemas[db] {
		return true
	}
	name := db + "." + table
	if len(f.databases) > 0 && !f.databases[db] && !f.databases[name] {
		return false
	}
	if f.tables != nil && !f.tables.MatchString(name) {
		return false
	}
	return f.exclude == nil || !f.exclude.MatchString(name) && !f.exclude.MatchString(db)
}

// keep tells whether the file at rel ("db/t.ibd", "db/t#P#p0.ibd", "db/db.opt") is
// backed up; files outside the databases always are.
func (f *Filter) keep(rel string) bool {
	db, name, ok := strings.Cut(rel, "/")
	if !ok || f == nil {
		return true
	}
	if name == "db.opt" {
		return true // every database stays known, if empty
	}
	table, _, _ := strings.Cut(name, ".")
	table, _, _ = strings.Cut(table, "#P#")
	table, _, _ = strings.Cut(table, "#p#")
	return f.includes(db, table)
}

// apply drops the files the filter leaves out of p.
func (f *Filter) apply(p plan) plan {
	if f == nil {
		return p
	}
	keep := func(in []srcFile) []srcFile {
		var out []srcFile
		for _, s := range in {
			if s.System || f.keep(s.Rel) {
				out = append(out, s)
			}
		}
		return out
	}
	p.InnoDB, p.DDLStable, p.Commit = keep(p.InnoDB), keep(p.DDLStable), keep(p.Commit)
	return p
}

// keepTables are those of ts the backup holds (all without a filter).
func (f *Filter) keepTables(ts []mariadb.Table) []mariadb.Table {
	if f == nil {
		return ts
	}
	var out []mariadb.Table
	for _, t := range ts {
		if f.includes(t.Schema, t.Name) {
			out = append(out, t)
		}
	}
	return out
}
