package archiver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-sql-driver/mysql"
)

// loadTip finds where the archive ends: the last segment's last event.
func (r *run) loadTip(ctx context.Context) error {
	segs, err := r.a.Segments(ctx)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		r.log.Info("binlog-archive: the archive is empty: starting from the oldest binlog on the server")
		return nil
	}
	covered, err := r.a.Covered(ctx)
	if err != nil {
		return err
	}
	for _, c := range covered { // left by an archiver stopped in the middle of a merge
		if err := r.a.Delete(ctx, c); err != nil {
			return err
		}
	}
	s := segs[len(segs)-1]
	b, err := r.a.Read(ctx, s)
	if err != nil {
		return err
	}
	off := s.Start
	if off == 0 {
		b, off = b[4:], 4
	}
	var last binlog.Event
	for len(b) > 0 {
		e, err := binlog.SplitEvent(b, off)
		if err != nil {
			return fmt.Errorf("binlog archive: last segment %s: %w", s.Key, err)
		}
		last, b, off = e, b[len(e.Raw):], e.End
	}
	last.Raw = nil
	r.tip = tip{pos: binlog.Position{File: s.File, Pos: s.End}, last: last,
		complete: last.Type == replication.ROTATE_EVENT || last.Type == replication.STOP_EVENT}
	r.log.Info("binlog-archive: resuming after the archive's last stored event", "at", r.tip.pos.String())
	return nil
}

// serverLog is one line of SHOW BINARY LOGS.
type serverLog struct {
	name string
	size int64
}

// binaryLogs lists the server's binlog files, checking it writes one.
func binaryLogs(ctx context.Context, db *sql.DB) ([]serverLog, error) {
	var logBin int
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin").Scan(&logBin); err != nil {
		return nil, err
	}
	if logBin == 0 {
		return nil, fatalf("the server writes no binary log (log_bin is OFF): start it with log_bin to archive its binlog")
	}
	rows, err := mariadb.QueryMaps(ctx, db, "SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("SHOW BINARY LOGS: %w", err) // a missing BINLOG MONITOR: classify says so
	}
	var logs []serverLog
	for _, row := range rows {
		l := serverLog{name: row["Log_name"]}
		if err := binlog.CheckFile(l.name); err != nil {
			return nil, fatalf("the server's %w", err)
		}
		fmt.Sscan(row["File_size"], &l.size)
		logs = append(logs, l)
	}
	if len(logs) == 0 {
		return nil, fatalf("the server lists no binary log (SHOW BINARY LOGS is empty)")
	}
	return logs, nil
}

// startPosition decides where this session starts on the server: after the archive's
// last byte when the server still has it, or at the server's oldest binlog (an empty
// archive) or the first binlog after the archive's last file, recording a gap when
// bytes were lost.
func (r *run) startPosition(ctx context.Context, db *sql.DB, logs []serverLog) (binlog.Position, error) {
	if r.tip.pos.File == "" {
		return binlog.Position{File: logs[0].name, Pos: 4}, nil
	}
	i := slices.IndexFunc(logs, func(l serverLog) bool { return l.name == r.tip.pos.File })
	if i >= 0 {
		return r.tip.pos, r.sameServer(ctx, db, logs[i])
	}
	j := slices.IndexFunc(logs, func(l serverLog) bool { return binlog.CompareFiles(l.name, r.tip.pos.File) > 0 })
	if j < 0 {
		return binlog.Position{}, fatalf("the server's binlogs (%s to %s) all come before the archive's %s: a different server, or RESET MASTER: archive it into another repository",
			logs[0].name, logs[len(logs)-1].name, r.tip.pos)
	}
	next := binlog.Position{File: logs[j].name, Pos: 4}
	if r.tip.complete && isNext(r.tip.pos.File, next.File) {
		return next, nil
	}
	gap := binlog.Gap{After: r.tip.pos, Resumed: next, Detected: time.Now().UTC(),
		Reason: "binlog purged from the server before it was archived"}
	if err := r.a.RecordGap(ctx, gap); err != nil {
		return binlog.Position{}, err
	}
	r.cfg.Stats.gap()
	r.log.Error("binlog-archive: GAP: the server no longer has the binlog the archive lacks; a restore cannot pass it", "gap", gap.String())
	return next, nil
}

// isNext says whether b is the file after a (same base, number one more).
func isNext(a, b string) bool {
	return binlog.CompareFiles(a, b) < 0 && binlog.Position{File: a}.Next().File == b
}

// sameServer checks that the server's file holds, where the archive's last event lies,
// that same event: otherwise a different server (or a reset binlog) is behind the
// address.
func (r *run) sameServer(ctx context.Context, db *sql.DB, l serverLog) error {
	if l.size < r.tip.pos.Pos {
		return fatalf("the server's %s has %d bytes, the archive holds %d of it: a different server (or RESET MASTER) is behind this address: archive it into another repository", l.name, l.size, r.tip.pos.Pos)
	}
	var logName, typ, info string
	var pos, serverID, end int64
	err := db.QueryRowContext(ctx, fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", l.name, r.tip.last.Start)).
		Scan(&logName, &pos, &typ, &serverID, &end, &info)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1220 { // wrong offset: no event starts there
		return fatalf("the server's %s has no event at offset %d, where the archive's last event of it starts: a different server is behind this address: archive it into another repository", l.name, r.tip.last.Start)
	}
	if err != nil {
		return fmt.Errorf("read the server's event at %s:%d: %w", l.name, r.tip.last.Start, err)
	}
	if end != r.tip.pos.Pos || uint32(serverID) != r.tip.last.ServerID {
		return fatalf("the server's %s holds another event at offset %d (%s from server %d ending at %d) than the archive (server %d, ending at %d): a different server is behind this address: archive it into another repository",
			l.name, r.tip.last.Start, typ, serverID, end, r.tip.last.ServerID, r.tip.pos.Pos)
	}
	return nil
}
