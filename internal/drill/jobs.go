package drill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// job is one table to check.
type job struct {
	table    mariadb.Table
	checksum bool // read it whole too
}

// result is what checking one table found.
type result struct {
	checksummed bool
	failures    []Failure
}

// runJobs checks the tables on parallel connections (0: 2) and returns what each
// found, in the order of jobs. An error is a drill that cannot go on: stopped, or the
// server gone (named by the table it was checking).
func runJobs(ctx context.Context, db *sql.DB, jobs []job, parallel int, extended bool) ([]result, error) {
	if parallel <= 0 {
		parallel = 2
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := make([]result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := checkTable(ctx, db, jobs[i], extended)
				if err != nil {
					cancel(err)
					return
				}
				out[i] = r
			}
		}()
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// checkTable runs CHECK TABLE on one table, then reads it whole if asked and it
// checked OK.
func checkTable(ctx context.Context, db *sql.DB, j job, extended bool) (result, error) {
	var r result
	q := "CHECK TABLE " + j.table.Quoted()
	if extended {
		q += " EXTENDED"
	}
	rows, err := mariadb.QueryMaps(ctx, db, q)
	if err != nil {
		return r, tableErr(ctx, j.table, "CHECK TABLE", err, &r)
	}
	msgs := make([]CheckRow, len(rows))
	for i, row := range rows {
		msgs[i] = CheckRow{MsgType: row["Msg_type"], MsgText: row["Msg_text"]}
	}
	if what := CheckResult(msgs); what != "" {
		r.failures = append(r.failures, Failure{Table: j.table.String(), What: what})
		return r, nil
	}
	if !j.checksum {
		return r, nil
	}
	r.checksummed = true
	var name string
	var sum sql.NullInt64
	if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+j.table.Quoted()+" EXTENDED").Scan(&name, &sum); err != nil {
		return r, tableErr(ctx, j.table, "CHECKSUM TABLE", err, &r)
	}
	if !sum.Valid {
		r.failures = append(r.failures, Failure{Table: j.table.String(), What: "CHECKSUM TABLE: the server could not read the table (no checksum)"})
	}
	return r, nil
}

// tableErr sorts a statement's error: the server's answer about the table is a
// failure of that table (recorded in r); anything else (the drill stopped, the
// connection or the server gone) ends the drill, naming the table.
func tableErr(ctx context.Context, t mariadb.Table, stmt string, err error, r *result) error {
	if ctx.Err() != nil {
		return errors.Join(errStopped, context.Cause(ctx))
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		r.failures = append(r.failures, Failure{Table: t.String(), What: fmt.Sprintf("%s: %s", stmt, me.Message)})
		return nil
	}
	return fmt.Errorf("restore drill: the private server stopped answering during %s of %s: %w", stmt, t, err)
}
