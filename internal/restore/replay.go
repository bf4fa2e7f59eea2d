package restore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/timefmt"
)

// Replay applies archived binlog events to the prepared copy before it is swapped in:
// a point-in-time restore.
type Replay struct {
	Plan *binlog.Plan
	// Threads is the number of parallel applier threads (default: twice the cores).
	Threads int
}

// replay starts the stock server privately on the prepared staging copy with the
// plan's relay logs as its relay log, lets its parallel replication applier run them
// up to the plan's end (START SLAVE UNTIL), removes the replica configuration and
// shuts the server down cleanly. It returns the coordinates the copy has then.
func replay(ctx context.Context, b *Backup, staging, bin string, cfg Config) (mariadb.Coordinates, error) {
	p := cfg.Replay.Plan
	c := b.coordinates()
	if p.Groups == 0 {
		cfg.Log.Info("point-in-time: nothing to apply: the backup ends at the target", "gtid", c.GTIDBinlogPos)
		return c, nil
	}
	run, err := cfg.runDir("ferry-replay-")
	if err != nil {
		return c, fmt.Errorf("replay: %w", err)
	}
	defer os.RemoveAll(run)
	phase, resumed := resumedReplay(staging)
	if resumed && phase != replayPhase(p) {
		return c, setting.Errorf("the copy in %s was partly replayed for another point in time (%s): resume it with the %s or %s it was started with, or remove it to start over", staging, strings.TrimPrefix(phase, phaseReplaying+" "), setting.ToGTID, setting.ToTime)
	}
	if p, err = relayIn(staging, p, resumed); err != nil {
		return c, err
	}
	args, err := replayArgs(b, staging, p, cfg)
	if err != nil {
		return c, err
	}
	t0 := time.Now()
	cfg.Log.Info("point-in-time: applying the archived binlog with the server's parallel replication applier",
		"from", p.From.String(), "until", p.Until.String(), "transactions", p.Groups, "bytes", p.Bytes, "threads", threads(cfg.Replay))
	if resumed {
		cfg.Log.Info("resume: the replay was stopped cleanly by the interruption: it goes on where it stopped")
	}
	pc := mariadb.PrivateConfig{Binary: bin, Datadir: staging, RunDir: run, Args: args, ErrLog: errLogBeside(staging)}
	srv, err := cfg.starter().StartPrivate(ctx, pc)
	if err != nil {
		removeIfInterrupted(ctx, pc.ErrLog)
		return c, fmt.Errorf("replay: %w", err)
	}
	// From here on the copy holds transactions of the binlog: a resumed restore does
	// not take it for the recovered backup. (A server stopped before this point
	// applied none: the copy is still the recovered backup.)
	if err := addPhase(staging, replayPhase(p)); err != nil {
		srv.Shutdown(context.WithoutCancel(ctx))
		return c, err
	}
	if err := applyUntil(ctx, srv, p, resumed, cfg); err != nil {
		if ctx.Err() == nil {
			srv.Shutdown(context.WithoutCancel(ctx))
			return c, err
		}
		os.Remove(pc.ErrLog) // interrupted, not failed
		if serr := stopReplay(ctx, srv, staging); serr != nil {
			cfg.Log.Warn("the interrupted replay did not stop cleanly: a resumed restore starts it over", "err", serr)
		}
		return c, err
	}
	if err := srv.Shutdown(ctx); err != nil {
		return c, fmt.Errorf("replay: %w", err)
	}
	os.Remove(pc.ErrLog)
	if err := os.RemoveAll(filepath.Join(staging, relayDirName)); err != nil {
		return c, fmt.Errorf("replay: %w", err)
	}
	logApplied(cfg.Log, p, time.Since(t0))
	c.BinlogFile, c.BinlogPos = p.Until.File, uint64(p.Until.Pos)
	c.GTIDBinlogState = p.State.String()
	c.GTIDBinlogPos = binlogPos(p.State)
	c.GTIDCurrentPos = c.GTIDBinlogPos
	return c, nil
}

// logApplied says what the replay applied: its last transaction, and when that
// committed as ferry prints times (the host's zone, with the offset), so that the
// time pasted into --to-time means that instant.
func logApplied(log *slog.Logger, p *binlog.Plan, took time.Duration) {
	log.Info("point-in-time: applied", "last_gtid", p.Last.GTID.String(), "last_commit", timefmt.Format(p.Last.Time),
		"took", took.Round(time.Millisecond), "transactions_per_s", int(float64(p.Groups)/took.Seconds()))
}

// removeIfInterrupted removes the server's error log of a run that was interrupted
// (not failed): it tells nothing, and a resumed run starts the server again.
func removeIfInterrupted(ctx context.Context, errLog string) {
	if ctx.Err() != nil {
		os.Remove(errLog)
	}
}

func threads(r *Replay) int {
	if r.Threads > 0 {
		return r.Threads
	}
	return defaults.ReplayThreads()
}

// replayArgs are the private server's options: the backup's layout, and a replica
// that only applies (its relay log is the plan's), with a server_id of none of the
// events' servers (a replica skips its own), and no fsync per commit (the server is
// shut down cleanly before the copy is used; a failure discards the copy).
func replayArgs(b *Backup, staging string, p *binlog.Plan, cfg Config) ([]string, error) {
	opts, err := b.Options(cfg.Keys)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(filepath.Join(staging, "ib_logfile0"))
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	mem := cfg.UseMemory
	if mem == "" {
		mem = "256M"
	}
	id := uint32(4000000000)
	for p.ServerIDs[id] {
		id++
	}
	return append(opts.Args(), "--innodb-buffer-pool-size="+mem, "--innodb-log-file-size="+strconv.FormatInt(fi.Size(), 10),
		"--server-id="+strconv.FormatUint(uint64(id), 10),
		"--relay-log="+strings.TrimSuffix(p.RelayFiles[0], filepath.Ext(p.RelayFiles[0])), "--relay-log-index="+p.RelayIndex,
		"--relay-log-purge=OFF", "--relay-log-recovery=OFF", "--slave-sql-verify-checksum=ON",
		"--slave-parallel-threads="+strconv.Itoa(threads(cfg.Replay)), "--slave-parallel-mode=optimistic",
		"--slave-max-allowed-packet=1073741824", "--innodb-flush-log-at-trx-commit=0",
		"--master-info-file="+filepath.Join(filepath.Dir(p.RelayIndex), "master.info"),
		"--relay-log-info-file="+filepath.Join(filepath.Dir(p.RelayIndex), "relay-log.info")), nil
}

// applyUntil points the replica at the relay logs (unless resumed: it is where an
// interrupted run stopped), runs its applier up to the plan's end and checks it
// stopped exactly there.
func applyUntil(ctx context.Context, srv PrivateServer, p *binlog.Plan, resumed bool, cfg Config) error {
	db := srv.DB()
	stmts := []string{
		mariadb.ChangeMaster{Host: "ferry-binlog-archive", UseGTID: "no", RelayLogFile: filepath.Base(p.RelayFiles[0]), RelayLogPos: uint64(p.RelayPos)}.SQL(),
		fmt.Sprintf("START SLAVE SQL_THREAD UNTIL MASTER_LOG_FILE='%s', MASTER_LOG_POS=%d", p.Until.File, p.Until.Pos),
	}
	if resumed {
		stmts = stmts[1:]
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("replay: %s: %w", q, err)
		}
	}
	cfg.Log.Info("point-in-time: the applier runs", "until", p.Until.String())
	last := time.Now()
	for {
		st, err := mariadb.SlaveStatus(ctx, db)
		if err != nil {
			return fmt.Errorf("replay: SHOW SLAVE STATUS: %w", err)
		}
		if st["Last_SQL_Errno"] != "0" && st["Last_SQL_Errno"] != "" {
			return fmt.Errorf("replay: the server's applier stopped with error %s: %s (server log: %s)", st["Last_SQL_Errno"], st["Last_SQL_Error"], srv.LogErrors())
		}
		if st["Slave_SQL_Running"] == "No" {
			return stoppedAt(ctx, db, st, p)
		}
		if reached(st, p) {
			// The relay logs end at the plan's end: the applier waits there for more.
			if _, err := db.ExecContext(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
				return fmt.Errorf("replay: STOP SLAVE: %w", err)
			}
			continue
		}
		if time.Since(last) > 5*time.Second {
			cfg.Log.Info("point-in-time: applying", "at", st["Relay_Master_Log_File"]+":"+st["Exec_Master_Log_Pos"], "until", p.Until.String())
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stoppedAt checks the applier stopped at the plan's end, and removes the replica
// configuration (the restored server is not a replica of the archive).
func stoppedAt(ctx context.Context, db *sql.DB, st map[string]string, p *binlog.Plan) error {
	if !reached(st, p) {
		return fmt.Errorf("replay: the server's applier stopped at %s:%s, not at %s", st["Relay_Master_Log_File"], st["Exec_Master_Log_Pos"], p.Until)
	}
	if _, err := db.ExecContext(ctx, "RESET SLAVE ALL"); err != nil {
		return fmt.Errorf("replay: RESET SLAVE ALL: %w", err)
	}
	return nil
}

// binlogPos is @@gtid_binlog_pos of a binlog state: the last GTID of each domain.
func binlogPos(s binlog.State) string {
	last := map[uint32]binlog.GTID{}
	for k, seq := range s {
		if g, ok := last[k[0]]; !ok || seq > g.Seq {
			last[k[0]] = binlog.GTID{Domain: k[0], Server: k[1], Seq: seq}
		}
	}
	out := binlog.State{}
	for _, g := range last {
		out.Add(g)
	}
	return out.String()
}

// reached says whether the applier has committed every group up to the plan's end.
func reached(st map[string]string, p *binlog.Plan) bool {
	return st["Relay_Master_Log_File"] == p.Until.File && st["Exec_Master_Log_Pos"] == strconv.FormatInt(p.Until.Pos, 10)
}
