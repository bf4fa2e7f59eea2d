package backup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/setting"
)

// stages walks BACKUP STAGE START → FLUSH → BLOCK_DDL → BLOCK_COMMIT → END around the
// copies, then waits for the redo copy to reach the end LSN read under BLOCK_COMMIT.
func (j *job) stages(parent context.Context) (*Result, error) {
	ctx, fail := context.WithCancelCause(parent)
	res, err := j.stagesIn(ctx, fail)
	cause := context.Cause(ctx)
	fail(nil)
	j.releaseLockSpool()
	j.releaseTail()
	if err != nil && cause != nil && cause != context.Canceled {
		return nil, cause
	}
	return res, err
}

func (j *job) stagesIn(ctx context.Context, fail context.CancelCauseFunc) (*Result, error) {
	if _, err := j.lock.Enter(ctx, mariadb.StageStart); err != nil {
		return nil, err
	}
	three := j.wantThreeStage()
	kind := tailKept
	switch {
	case three && j.sink.Caps().Remote:
		kind = tailHeld // spooled locally until a re-copy round replaces it, or not
	case three:
		kind = tailTracker // kept unless a re-copy round replaces it
	}
	j.copyStart = j.clock.Now()
	first, err := j.openTail(ctx, fail, kind)
	if err != nil {
		return nil, err
	}
	j.copyFrom(ctx, first.t.Start().LSN)
	j.mode.start(ctx, j)
	p, err := j.scan()
	if err != nil {
		return nil, err
	}
	j.prog = progress.New(progress.Options{Label: "backup", Total: p.size(), Terminal: j.cfg.Terminal, Out: j.cfg.Progress, Log: j.log})
	defer j.prog.Finish()
	// aria_log_control first: Aria recovery of the copied tables starts from its checkpoint.
	if err := j.copyOthers(ctx, p.AriaControl); err != nil {
		return nil, err
	}
	if err := j.copyInnoDB(ctx, p.InnoDB); err != nil {
		return nil, err
	}
	if three {
		if err := j.threeStage(ctx, fail); err != nil {
			return nil, err
		}
	}
	// Copies under the backup locks run at full speed: --max-rate spares the server
	// during the long online copy, not while DDL or commits wait.
	j.limiter = nil
	res, err := j.underLocks(ctx)
	if err != nil {
		return nil, err
	}
	last, err := j.finishTail(ctx)
	if err != nil {
		return nil, err
	}
	j.m.LastLSN = last
	j.m.StartLSN = j.tail.t.Start().LSN
	if j.rolled != nil {
		j.m.StartLSN = j.rolled.lsn // every page holds every change below it
	}
	res.PageRereads, res.FreePages = j.stats.rereads.Load(), j.stats.freePages.Load()
	res.Rounds, res.PagesRecopied = j.recopy.rounds, j.recopy.pages
	res.HeldKept, res.HeldPatched = j.stats.resumeKept.Load(), j.stats.resumePatched.Load()
	res.Manifest = &j.m
	return res, nil
}

// underLocks runs BLOCK_DDL and BLOCK_COMMIT, with a replica's SQL thread stopped
// around them if asked (--safe-slave-backup).
func (j *job) underLocks(ctx context.Context) (*Result, error) {
	if j.cfg.Replica.SafeSlave {
		pause, err := j.srv.PauseReplica(ctx, cmp.Or(j.cfg.Replica.SafeSlaveTimeout, 300*time.Second))
		if pause != nil {
			defer func() {
				if err := pause.Resume(context.WithoutCancel(ctx)); err != nil {
					j.log.Error(err.Error())
				}
			}()
		}
		if err != nil {
			return nil, err
		}
		if pause != nil && pause.Stopped() {
			j.log.Info(string(setting.SafeSlaveBackup) + ": the replica's SQL thread is stopped until BLOCK_COMMIT ends")
		}
	}
	ddl, err := j.underBlockDDL(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Dir: j.sink.Name(), BlockDDL: ddl}
	if res.BlockCommit, err = j.underBlockCommit(ctx); err != nil {
		return nil, err
	}
	// The locks are released: what was copied under them goes to the end now.
	if err := j.storeLockSpool(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

func (p plan) size() int64 {
	var n int64
	for _, list := range [][]srcFile{p.InnoDB, p.DDLStable, p.Commit, p.AriaControl, p.AriaLogs} {
		for _, f := range list {
			n += f.Size
		}
	}
	return n
}

// copyInnoDB copies InnoDB tablespace files as the backup's mode does.
func (j *job) copyInnoDB(ctx context.Context, files []srcFile) error {
	return j.mode.copyInnoDB(ctx, j, files)
}

// underBlockDDL enters FLUSH and BLOCK_DDL, brings the InnoDB copy in line with DDL
// that ran during the copy, and copies the non-InnoDB files that are now stable. It
// returns how long BLOCK_DDL was held. On an end that is not Direct, everything
// copied from here to the end of BLOCK_COMMIT goes into the lock spool, whose room is
// checked before the first lock is taken.
func (j *job) underBlockDDL(ctx context.Context) (time.Duration, error) {
	j.prog.Stage("backup: BLOCK_DDL")
	p, err := j.scan()
	if err != nil {
		return 0, err
	}
	room, err := j.lockSpoolRoom(p)
	if err != nil {
		return 0, err
	}
	j.startLockSpool(room)
	if _, err := j.lock.Enter(ctx, mariadb.StageFlush); err != nil {
		return 0, err
	}
	wait, err := j.lock.Enter(ctx, mariadb.StageBlockDDL)
	if err != nil {
		return 0, err
	}
	t0 := j.clock.Now()
	j.recordTables(ctx)
	if p, err = j.scan(); err != nil {
		return 0, err
	}
	if err := j.reconcileDDL(ctx, p.InnoDB); err != nil {
		return 0, err
	}
	if err := j.copyOthers(ctx, p.DDLStable); err != nil {
		return 0, err
	}
	if err := j.copyAriaHeads(ctx, p.AriaLogs); err != nil {
		return 0, err
	}
	held := j.clock.Since(t0)
	j.lockTime("block_ddl", held)
	j.log.Info("BLOCK_DDL released", "held", held.Round(time.Microsecond), "wait", wait.Round(time.Millisecond), "spooled", j.heldBytes())
	return held, nil
}

// underBlockCommit copies what can change until commits stop, reads the end LSN and the
// binlog/GTID coordinates, flushes the redo up to the end LSN and ends the sequence. The
// redo copy finishes after the lock is released: it stops exactly at the end LSN.
func (j *job) underBlockCommit(ctx context.Context) (time.Duration, error) {
	j.prog.Stage("backup: BLOCK_COMMIT")
	if _, err := j.lock.Enter(ctx, mariadb.StageBlockCommit); err != nil {
		return 0, err
	}
	t0 := j.clock.Now()
	faultpoint.At(ctx, "block-commit", 1)
	p, err := j.scan()
	if err != nil {
		return 0, err
	}
	if err := j.readEnd(ctx); err != nil {
		return 0, err
	}
	if err := j.copyEndFiles(ctx); err != nil {
		return 0, err
	}
	if err := j.copyOthers(ctx, p.Commit); err != nil {
		return 0, err
	}
	if err := j.copyAriaTails(ctx, p.AriaLogs); err != nil {
		return 0, err
	}
	if _, err := j.lock.Enter(ctx, mariadb.StageEnd); err != nil {
		return 0, err
	}
	held := j.clock.Since(t0)
	j.lockTime("block_commit", held)
	j.log.Info("BLOCK_COMMIT released", "held", held.Round(time.Microsecond), "spooled", j.heldBytes(), "end_lsn", j.m.EndLSN,
		"binlog", fmt.Sprintf("%s:%d", j.m.Coordinates.BinlogFile, j.m.Coordinates.BinlogPos), "gtid", j.m.Coordinates.GTIDBinlogPos)
	return held, nil
}

// readEnd reads the end LSN and coordinates under BLOCK_COMMIT and stops the redo copy
// at the end LSN while commits are still blocked: redo the tailer reads after the lock
// is released may hold commits past the binlog position read here, and a copy that ran
// on into them would restore transactions its GTID does not include.
func (j *job) readEnd(ctx context.Context) error {
	end, c, err := j.lock.ReadEnd(ctx)
	if err != nil {
		return err
	}
	j.m.EndLSN, j.m.Coordinates = end, c
	j.tail.t.StopAt(end)
	return j.readSources(ctx)
}

// copyEndFiles copies what the server's layout needs beside the end point (MySQL's
// binlog up to the end position, for the recovery of prepared transactions).
func (j *job) copyEndFiles(ctx context.Context) error {
	parts, made, err := j.layout().endFiles(j.info, j.m.Coordinates)
	if err != nil {
		return err
	}
	for _, f := range parts {
		c, err := j.startCopy(f)
		if err != nil {
			return fmt.Errorf("copy %s: %w", f.Abs, err)
		}
		if err := j.copyTo(ctx, c, f.Size); err != nil {
			return err
		}
		if c.off != f.Size {
			return fmt.Errorf("copy %s: %d bytes read, %d expected", f.Abs, c.off, f.Size)
		}
		if err := j.endCopy(c); err != nil {
			return err
		}
	}
	for _, f := range made {
		mf, err := j.writeWhole(f.Rel, f.Data, "other")
		if err != nil {
			return err
		}
		j.record(copiedFile{Rel: mf.Path, Size: mf.Size, CRC: checksum.Sum(f.Data), Kind: "other"})
	}
	return nil
}

// readSources records where a replica replicates from (--slave-info), under
// BLOCK_COMMIT with its gtid_slave_pos.
func (j *job) readSources(ctx context.Context) error {
	o := j.cfg.Replica
	if !o.Info || j.srv == nil {
		return nil
	}
	src, err := j.srv.ReplicaSources(ctx)
	switch {
	case err != nil && o.BestEffort:
		j.log.Debug("not recording the replica's sources", "err", err)
		return nil
	case err != nil:
		return setting.Errorf("%s: %w", setting.SlaveInfo, err)
	case len(src) == 0 && !o.BestEffort:
		j.log.Warn(string(setting.SlaveInfo) + ": the server is not a replica; nothing to record")
	}
	j.m.Coordinates.Sources = src
	for _, s := range src {
		j.log.Info("replica of", "connection", s.Connection, "source", fmt.Sprintf("%s:%d", s.Host, s.Port),
			"file", s.File, "pos", s.Pos, "gtid_slave_pos", j.m.Coordinates.GTIDSlavePos)
	}
	return nil
}

func (j *job) lockTime(name string, d time.Duration) {
	if j.m.LockTimesMS == nil {
		j.m.LockTimesMS = map[string]int64{}
	}
	j.m.LockTimesMS[name] = d.Milliseconds()
}

// tableLister is a backup lock that lists the server's tables on its own connection
// (MariaDB's): under BLOCK_DDL the list is the end point's.
type tableLister interface {
	Tables(ctx context.Context) ([]mariadb.Table, error)
}

// recordTables records the tables of the backup's end point in the manifest, for a
// restore drill to check the restored copy against. A server that cannot list them
// costs the drill that check, not the backup.
func (j *job) recordTables(ctx context.Context) {
	tl, ok := j.lock.(tableLister)
	if !ok {
		return
	}
	t0 := j.clock.Now()
	ts, err := tl.Tables(ctx)
	if err != nil {
		j.log.Warn("the table list was not recorded: a restore drill of this backup cannot tell a missing table", "err", err)
		return
	}
	j.m.Tables = j.cfg.Filter.keepTables(ts)
	j.log.Debug("recorded the table list", "tables", len(j.m.Tables), "took", j.clock.Since(t0).Round(time.Microsecond))
}
