package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// BackupLock is MySQL's side of the backup's stage sequence, on a connection of its
// own (the server releases every lock if it goes away):
//   - START takes LOCK INSTANCE FOR BACKUP, held to the end: DDL, file creation and
//     operations that bypass the redo wait while the copy runs; DML and commits do not.
//   - FLUSH and BLOCK_DDL add nothing (the instance lock already holds DDL off).
//   - BLOCK_COMMIT takes FLUSH TABLES WITH READ LOCK only if the server has non-InnoDB
//     tables (MyISAM and the like, whose files are copied under it), within FTWRLLimits;
//     else commits never wait.
//   - ReadEnd reads the end point from performance_schema.log_status.
//   - END releases both.
type BackupLock struct {
	db      *sql.DB
	conn    *sql.Conn
	connID  uint64 // conn's server connection id
	ftwrl   FTWRLLimits
	datadir string
	binlogs string // the binlog's directory; "" without a binlog
	log     *slog.Logger
	stage   mariadb.Stage
	flushed bool      // FLUSH TABLES WITH READ LOCK is held
	blocked time.Time // when FLUSH TABLES WITH READ LOCK was granted
}

// NewBackupLock takes a dedicated connection for the sequence.
func NewBackupLock(ctx context.Context, db *sql.DB, info mariadb.Info, log *slog.Logger) (*BackupLock, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open backup-lock connection: %w", err)
	}
	// The locks wait as long as the server makes them; an empty sql_mode keeps the
	// statements below valid whatever the server's default.
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout=31536000, sql_mode=''"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set lock_wait_timeout: %w", err)
	}
	l := &BackupLock{db: db, conn: conn, datadir: info.Datadir, log: log, ftwrl: DefaultFTWRLLimits()}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&l.connID); err != nil {
		conn.Close()
		return nil, fmt.Errorf("open backup-lock connection: %w", err)
	}
	if on(info.Vars["log_bin"]) && info.Vars["log_bin_basename"] != "" {
		l.binlogs = filepath.Dir(info.Vars["log_bin_basename"])
	}
	return l, nil
}

// Enter moves to stage s and returns how long the server took to grant it.
func (l *BackupLock) Enter(ctx context.Context, s mariadb.Stage) (time.Duration, error) {
	t0 := time.Now()
	var err error
	switch s {
	case mariadb.StageStart:
		err = l.exec(ctx, "LOCK INSTANCE FOR BACKUP")
	case mariadb.StageBlockCommit:
		err = l.blockCommits(ctx)
	case mariadb.StageEnd:
		err = l.release(ctx)
	}
	if err != nil {
		return 0, err
	}
	l.stage = s
	return time.Since(t0), nil
}

// blockCommits takes FLUSH TABLES WITH READ LOCK if non-InnoDB tables exist.
func (l *BackupLock) blockCommits(ctx context.Context) error {
	others, err := NonInnoDBTables(l.datadir)
	if err != nil {
		return err
	}
	if len(others) == 0 {
		l.log.Info("only InnoDB tables: commits are not blocked; the end point comes from performance_schema.log_status")
		return nil
	}
	if err := l.flushWithReadLock(ctx); err != nil {
		return err
	}
	l.flushed, l.blocked = true, time.Now()
	l.log.Info("non-InnoDB tables: commits blocked by FLUSH TABLES WITH READ LOCK while their files are copied", "tables", list(others))
	return nil
}

func (l *BackupLock) release(ctx context.Context) error {
	if l.flushed {
		if err := l.exec(ctx, "UNLOCK TABLES"); err != nil {
			return err
		}
		l.flushed = false
		l.log.Info("commits were blocked", "for", time.Since(l.blocked).Round(time.Microsecond))
	}
	return l.exec(ctx, "UNLOCK INSTANCE")
}

func (l *BackupLock) exec(ctx context.Context, q string) error {
	if _, err := l.conn.ExecContext(ctx, q); err != nil {
		if mariadb.IsAccessDenied(err) {
			return fmt.Errorf("%s: %w: GRANT %s ON *.* TO the backup user", q, err, strings.Join(BackupGrants, ", "))
		}
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// ReadEnd reads the end point of the backup from performance_schema.log_status: the
// InnoDB LSN and the binlog file, position and gtid_executed, read by the server under
// one lock so that they agree. It then makes the redo durable up to the LSN (FLUSH
// ENGINE LOGS). A transaction binlogged below the position may be only prepared in
// InnoDB at the LSN: its recovery commits it from the copied binlog (the layout's end
// files), and its GTID, not yet in gtid_executed, is read from that binlog
// (BinlogGTIDs). The binlog is rotated first (as XtraBackup does), so that the file
// read and copied holds only the last moments.
func (l *BackupLock) ReadEnd(ctx context.Context) (uint64, mariadb.Coordinates, error) {
	if l.binlogs != "" {
		if err := l.exec(ctx, "FLUSH NO_WRITE_TO_BINLOG BINARY LOGS"); err != nil {
			return 0, mariadb.Coordinates{}, err
		}
	}
	var local, engines string
	err := l.conn.QueryRowContext(ctx, "SELECT LOCAL, STORAGE_ENGINES FROM performance_schema.log_status").Scan(&local, &engines)
	if err != nil {
		if mariadb.IsAccessDenied(err) {
			return 0, mariadb.Coordinates{}, fmt.Errorf("read performance_schema.log_status: %w: GRANT BACKUP_ADMIN ON *.* and SELECT ON performance_schema.log_status TO the backup user", err)
		}
		return 0, mariadb.Coordinates{}, fmt.Errorf("read performance_schema.log_status: %w", err)
	}
	end, c, err := parseLogStatus(local, engines)
	if err != nil {
		return 0, c, err
	}
	if _, err := l.conn.ExecContext(ctx, "FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS"); err != nil {
		return 0, c, fmt.Errorf("FLUSH ENGINE LOGS: %w", err)
	}
	if l.binlogs != "" && c.BinlogFile != "" {
		set, err := BinlogGTIDs(filepath.Join(l.binlogs, c.BinlogFile), c.BinlogPos, c.GTIDBinlogPos)
		if err != nil {
			return 0, c, fmt.Errorf("the end point's GTIDs: %w", err)
		}
		if set != c.GTIDBinlogPos {
			l.log.Info("the binlog holds transactions that were committing at the end point: their GTIDs join the backup's", "log_status", c.GTIDBinlogPos, "with_binlog", set)
		}
		c.GTIDBinlogPos, c.GTIDCurrentPos = set, set
	}
	return end, c, nil
}

// maxStatus bounds the log_status documents parsed.
const maxStatus = 16 << 20

// parseLogStatus reads log_status's LOCAL and STORAGE_ENGINES documents.
func parseLogStatus(local, engines string) (uint64, mariadb.Coordinates, error) {
	var c mariadb.Coordinates
	if len(local) > maxStatus || len(engines) > maxStatus {
		return 0, c, fmt.Errorf("performance_schema.log_status: reply too large")
	}
	var l struct {
		GTIDExecuted string `json:"gtid_executed"`
		File         string `json:"binary_log_file"`
		Pos          uint64 `json:"binary_log_position"`
	}
	if err := json.Unmarshal([]byte(local), &l); err != nil {
		return 0, c, fmt.Errorf("performance_schema.log_status LOCAL %q: %w", clip(local), err)
	}
	var e struct {
		InnoDB struct {
			LSN           uint64 `json:"LSN"`
			LSNCheckpoint uint64 `json:"LSN_checkpoint"`
		} `json:"InnoDB"`
	}
	if err := json.Unmarshal([]byte(engines), &e); err != nil {
		return 0, c, fmt.Errorf("performance_schema.log_status STORAGE_ENGINES %q: %w", clip(engines), err)
	}
	if e.InnoDB.LSN == 0 {
		return 0, c, fmt.Errorf("performance_schema.log_status reports no InnoDB LSN: %q", clip(engines))
	}
	gtid := GTIDSet(l.GTIDExecuted)
	c = mariadb.Coordinates{BinlogFile: l.File, BinlogPos: l.Pos, GTIDBinlogPos: gtid, GTIDCurrentPos: gtid}
	if strings.ContainsAny(c.BinlogFile, "/\\") || strings.HasPrefix(c.BinlogFile, ".") {
		return 0, c, fmt.Errorf("performance_schema.log_status names an unexpected binlog file %q", clip(c.BinlogFile))
	}
	return e.InnoDB.LSN, c, nil
}

// GTIDSet is a gtid_executed value on one line (the server breaks long ones).
func GTIDSet(s string) string {
	return strings.Join(strings.Fields(s), "")
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// Close ends the sequence if it is still inside it and releases the connection.
func (l *BackupLock) Close() error {
	if l.stage != "" && l.stage != mariadb.StageEnd {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = l.release(ctx)
		l.stage = mariadb.StageEnd
	}
	return l.conn.Close()
}

// nonInnoDBExts are the files of MySQL's non-transactional engines: MyISAM, MERGE,
// CSV, ARCHIVE.
var nonInnoDBExts = map[string]bool{".MYD": true, ".MYI": true, ".MRG": true, ".CSV": true, ".CSM": true, ".ARZ": true, ".ARM": true}

// logTables are the mysql schema's CSV log tables: written by the server itself, never
// blocked by FLUSH TABLES WITH READ LOCK, so they do not call for it.
var logTables = map[string]bool{"general_log": true, "slow_log": true}

// NonInnoDBTables lists the tables of datadir whose files need commits blocked while
// they are copied: those of a non-transactional engine (their files on disk, which the
// backup user sees whatever its table grants), except the mysql schema's log tables.
func NonInnoDBTables(datadir string) ([]string, error) {
	dbs, err := os.ReadDir(datadir)
	if err != nil {
		return nil, fmt.Errorf("list non-InnoDB tables: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, d := range dbs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), "#") {
			continue
		}
		files, err := os.ReadDir(filepath.Join(datadir, d.Name()))
		if err != nil {
			continue // dropped while listing
		}
		for _, f := range files {
			ext := filepath.Ext(f.Name())
			table := strings.TrimSuffix(f.Name(), ext)
			if !nonInnoDBExts[strings.ToUpper(ext)] || (d.Name() == "mysql" && logTables[table]) {
				continue
			}
			if name := d.Name() + "." + table; !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
