// Package tableimport restores single InnoDB tables from a backup into a running
// server: the tables are exported from a private server on the prepared copy (FLUSH
// TABLES ... FOR EXPORT writes each tablespace's .cfg) and imported into the live server
// with ALTER TABLE ... DISCARD/IMPORT TABLESPACE, under a new name beside the live
// table, in place of a dropped one, or in place of a live one that is kept aside.
package tableimport

import (
	"errors"
	"regexp"
	"strings"

	"github.com/ferry-backup/ferry/internal/setting"
)

// Name is a table: database and table name.
type Name struct{ DB, Table string }

// String is db.table.
func (n Name) String() string { return n.DB + "." + n.Table }

// quoted is `db`.`table`.
func (n Name) quoted() string { return "`" + n.DB + "`.`" + n.Table + "`" }

// plainName is what a name may hold: names whose file names are the names themselves
// (MariaDB encodes other characters in file names, e.g. '-' as @002d).
var plainName = regexp.MustCompile(`^[A-Za-z0-9_$]{1,64}$`)

// ParseList reads "db.t1,db.t2".
func ParseList(s string) ([]Name, error) {
	var out []Name
	seen := map[Name]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		db, t, ok := strings.Cut(part, ".")
		if !ok {
			return nil, setting.Errorf("%s %q: name each table as database.table", setting.Tables, part)
		}
		n := Name{db, t}
		if err := n.check(); err != nil {
			return nil, setting.Errorf("%s %q: %w", setting.Tables, part, err)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, setting.Errorf("%s: name at least one table as database.table", setting.Tables)
	}
	return out, nil
}

func (n Name) check() error {
	if !plainName.MatchString(n.DB) || !plainName.MatchString(n.Table) {
		return errors.New("only letters, digits, '_' and '$' are supported in database and table names")
	}
	return nil
}

// ParseTarget reads --rename-to: a table name in the same database, or database.table.
func ParseTarget(s string, from Name) (Name, error) {
	n := Name{DB: from.DB, Table: s}
	if db, t, ok := strings.Cut(s, "."); ok {
		n = Name{DB: db, Table: t}
	}
	if err := n.check(); err != nil {
		return Name{}, setting.Errorf("%s %q: %w", setting.RenameTo, s, err)
	}
	return n, nil
}
