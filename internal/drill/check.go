package drill

import (
	"fmt"
	"strings"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// Failure is one thing the drill found wrong, named by its table.
type Failure struct {
	Table string // schema.table
	What  string // what failed: CHECK TABLE's messages, a missing table, an unreadable row
}

// String is the failure on one line: "shop.orders: CHECK TABLE: ...".
func (f Failure) String() string { return f.Table + ": " + f.What }

// Compare checks the tables found in the restored copy against those the backup
// recorded at its end point: a recorded table the copy lacks (its definition is gone,
// so the server does not list it) and a table whose engine changed fail. A table
// found but not recorded does not: the server may make tables of its own (an upgrade
// of the system schema), and a missing one is what loses data.
func Compare(recorded, found []mariadb.Table) []Failure {
	have := make(map[string]mariadb.Table, len(found))
	for _, t := range found {
		have[t.String()] = t
	}
	var out []Failure
	for _, want := range recorded {
		got, ok := have[want.String()]
		switch {
		case !ok:
			out = append(out, Failure{Table: want.String(), What: fmt.Sprintf("missing from the restored copy (the backup recorded it, engine %s, at its end point)", orUnknown(want.Engine))})
		case want.Engine != "" && got.Engine == "":
			out = append(out, Failure{Table: want.String(), What: fmt.Sprintf("the restored server cannot open its definition (the backup recorded engine %s)", want.Engine)})
		case want.Engine != "" && !strings.EqualFold(want.Engine, got.Engine):
			out = append(out, Failure{Table: want.String(), What: fmt.Sprintf("engine %s in the restored copy, %s recorded at the backup's end point", got.Engine, want.Engine)})
		}
	}
	return out
}

// orUnknown is s, or "unknown".
func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// CheckRow is one row of CHECK TABLE's result.
type CheckRow struct {
	MsgType string // status, error, warning, note, info
	MsgText string
}

// CheckResult reads CHECK TABLE's rows for one table: "" if the table checked OK,
// otherwise what is wrong, the server's messages joined. A table fails on any error
// row, and on a final status other than OK ("Table is already up to date" is OK; a
// note that the engine cannot check it is not a failure: nothing was found wrong).
// Warnings are told only with a failure (InnoDB warns which index is corrupted, then
// fails with "Corrupt").
func CheckResult(rows []CheckRow) string {
	var msgs []string
	failed := len(rows) == 0
	for _, r := range rows {
		typ := strings.ToLower(r.MsgType)
		switch typ {
		case "error":
			failed = true
		case "status":
			if !okStatus(r.MsgText) {
				failed = true
			}
			if strings.EqualFold(r.MsgText, "OK") {
				continue
			}
		case "note", "info":
			continue
		}
		msgs = append(msgs, typ+": "+strings.TrimSpace(r.MsgText))
	}
	if !failed {
		return ""
	}
	if len(msgs) == 0 {
		return "CHECK TABLE returned nothing"
	}
	return "CHECK TABLE: " + strings.Join(msgs, "; ")
}

// okStatus tells whether a status row of CHECK TABLE says the table is sound.
func okStatus(text string) bool {
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "ok", "table is already up to date":
		return true
	}
	return false
}
