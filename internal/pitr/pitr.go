// Package pitr plans a point-in-time restore from a repository: the newest backup at
// or before the target, and the archived binlog from that backup's position to the
// target, checked and written as relay logs for the restored server to apply.
package pitr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/timefmt"
)

// ErrNoBackup means no backup of the repository lies at or before the target.
var ErrNoBackup = errors.New("no backup before the target")

// Choose returns the newest complete backup from which the target is reached by
// applying binlog: for a GTID, one whose GTID state does not hold it yet; for a time,
// one that ended at or before it (its position, taken under BLOCK_COMMIT, is earlier
// still). Backups of a server without a binary log cannot be rolled forward.
func Choose(entries []repo.Entry, t binlog.Target) (*manifest.Manifest, error) {
	var ms []*manifest.Manifest
	for _, e := range entries {
		if m := e.Manifest; m != nil && m.Coordinates.BinlogFile != "" {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: the repository has no complete backup of a server with a binary log (log_bin)", ErrNoBackup)
	}
	slices.SortFunc(ms, func(a, b *manifest.Manifest) int { return b.EndTime.Compare(a.EndTime) })
	for _, m := range ms {
		ok, err := before(m, t)
		if err != nil {
			return nil, err
		}
		if ok {
			return m, nil
		}
	}
	oldest := ms[len(ms)-1]
	if t.GTID != nil {
		return nil, fmt.Errorf("%w: GTID %s is already in the oldest backup %s (its GTID position is %s): there is no backup to roll forward from to it", ErrNoBackup, t.GTID, oldest.ID, oldest.Coordinates.GTIDBinlogPos)
	}
	return nil, setting.Errorf("%w: %s %s is before the oldest backup %s ended (%s): there is no backup to roll forward from", ErrNoBackup, setting.ToTime,
		timefmt.Format(t.Time), oldest.ID, timefmt.Format(oldest.EndTime))
}

// before says whether m's position precedes the target.
func before(m *manifest.Manifest, t binlog.Target) (bool, error) {
	if t.GTID == nil {
		// To the second, as binlog timestamps and printed times are: the backup holds
		// no commit stamped later than the second it ended in.
		return !m.EndTime.Truncate(time.Second).After(t.Time), nil
	}
	st, err := binlog.ParseState(m.Coordinates.GTIDBinlogState)
	if err != nil {
		return false, fmt.Errorf("backup %s: gtid_binlog_state: %w", m.ID, err)
	}
	seq, ok := st.DomainSeq(t.GTID.Domain)
	return !ok || seq < t.GTID.Seq, nil
}

// Plan chooses the backup (id, or the newest that fits if id is "") and writes the
// relay logs that take it to the target into relayDir.
func Plan(ctx context.Context, r *repo.Repo, a *binlog.Archive, id string, t binlog.Target, relayDir string) (*manifest.Manifest, *binlog.Plan, error) {
	entries, err := candidates(ctx, r, id)
	if err != nil {
		return nil, nil, err
	}
	m, err := Choose(entries, t)
	if err != nil {
		return nil, nil, err
	}
	segs, err := a.Segments(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(segs) == 0 {
		return nil, nil, fmt.Errorf("the repository %s has no binlog archive: run ferry binlog-archive against the server to keep one", a.Location())
	}
	state, err := binlog.ParseState(m.Coordinates.GTIDBinlogState)
	if err != nil {
		return nil, nil, fmt.Errorf("backup %s: gtid_binlog_state: %w", m.ID, err)
	}
	from := binlog.Position{File: m.Coordinates.BinlogFile, Pos: int64(m.Coordinates.BinlogPos)}
	p, err := a.PlanReplay(ctx, from, state, t, relayDir)
	if err != nil {
		return nil, nil, fmt.Errorf("from backup %s: %w", m.ID, err)
	}
	return m, p, nil
}

// candidates are the backups a restore may start from: the one named (an id or
// "latest"), or all.
func candidates(ctx context.Context, r *repo.Repo, id string) ([]repo.Entry, error) {
	if id == "" {
		return r.List(ctx)
	}
	m, err := r.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	return []repo.Entry{{ID: m.ID, Manifest: m}}, nil
}
