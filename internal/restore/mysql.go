package restore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/mysql"
	"github.com/ferry-backup/ferry/internal/mysqlredo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// MySQL backups (a manifest whose server family is mysql) are recovered by the stock
// mysqld of their series: the backup's xtrabackup_logfile becomes #innodb_redo, cut at
// the end point, and a private, networkless mysqld runs its crash recovery (and the
// binlog's resolution of prepared transactions) on the copy, then stops slowly.

// IsMySQL tells whether b was taken from a MySQL server (nil: no).
func (b *Backup) IsMySQL() bool {
	return b != nil && b.Manifest != nil && b.Manifest.Server.Family == mariadb.FamilyMySQL
}

// mysqlSeries is the backup's "8.0".
func (b *Backup) mysqlSeries() string {
	s, _, _ := mariadb.Series(b.ServerVersion)
	return s
}

// mysqlServer finds the mysqld that recovers b and checks its version: the backup's
// series, and not older than the backup's server (its redo may hold records an older
// release does not know).
func (b *Backup) mysqlServer(ctx context.Context, spec string) (string, error) {
	bin, err := mysql.FindMysqld(ctx, spec, b.mysqlSeries())
	if err != nil {
		return "", err
	}
	v, err := mysql.MysqldVersion(ctx, bin)
	if err != nil {
		return "", setting.Errorf("%w: the backup was taken from MySQL %s; pass %s with its mysqld", err, b.ServerVersion, setting.Mariadbd)
	}
	if !sameOrNewer(v, b.ServerVersion) {
		return "", setting.Errorf("%s is MySQL %s, but the backup was taken from MySQL %s: recover it with mysqld %s or a later %s release (%s)", bin, v, b.ServerVersion, versionOnly(b.ServerVersion), b.mysqlSeries(), setting.Mariadbd)
	}
	return bin, nil
}

var versionNums = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

func versionOnly(v string) string { return versionNums.FindString(v) }

// sameOrNewer tells whether version have is of want's series and not older.
func sameOrNewer(have, want string) bool {
	h, w := versionNums.FindStringSubmatch(have), versionNums.FindStringSubmatch(want)
	if h == nil || w == nil || h[1] != w[1] || h[2] != w[2] {
		return false
	}
	var hp, wp int
	fmt.Sscan(h[3], &hp)
	fmt.Sscan(w[3], &wp)
	return hp >= wp
}

// mysqlRules are the settings a MySQL backup may give its recovery, each checked.
var mysqlRules = map[string]func(string) (string, error){
	"innodb_page_size":          pageSize,
	"innodb_checksum_algorithm": oneOf("crc32", "strict_crc32", "innodb", "strict_innodb", "none", "strict_none"),
	"innodb_log_checksums":      oneOf("ON", "OFF"),
	"innodb_data_file_path":     dataFilePath,
	"lower_case_table_names":    intRange(0, 2),
	"server_id":                 intRange(0, 1<<31-1),
	"gtid_mode":                 oneOf("ON", "OFF", "ON_PERMISSIVE", "OFF_PERMISSIVE"),
	"enforce_gtid_consistency":  oneOf("ON", "OFF", "WARN"),
}

// binlogBase is a binlog base name from a backup: a plain file name.
var binlogBase = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// mysqlArgs are the recovery's server options from the backup's settings: its layout,
// and the binlog the backup copied up to its end point (the recovery commits the
// transactions it holds that InnoDB had only prepared).
func mysqlArgs(settings map[string]string, dir string) ([]string, error) {
	var args []string
	for name, raw := range settings {
		rule, ok := mysqlRules[name]
		if !ok {
			continue
		}
		v, err := rule(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("the backup sets %s to %q: %w; the backup was tampered with or damaged", name, raw, err)
		}
		args = append(args, "--"+strings.ReplaceAll(name, "_", "-")+"="+v)
	}
	sort.Strings(args)
	base := filepath.Base(settings["log_bin_basename"])
	if !strings.EqualFold(settings["log_bin"], "ON") || settings["log_bin_basename"] == "" {
		return append(args, "--skip-log-bin"), nil
	}
	if !binlogBase.MatchString(base) {
		return nil, fmt.Errorf("the backup names its binlog %q: the backup was tampered with or damaged", base)
	}
	if _, err := os.Stat(filepath.Join(dir, base+".index")); err != nil {
		return nil, fmt.Errorf("the backup's server wrote a binlog, but the backup holds no %s.index (%v): it is damaged", base, err)
	}
	return append(args, "--log-bin="+base, "--log-bin-index="+base+".index"), nil
}

// recoveryTuning are the private recovery's own server options: its page writes are
// not doubled (the doublewrite buffer guards against a power cut tearing pages; a torn
// staging copy is restored again from the backup, as XtraBackup's prepare does without
// it), and its page cleaner flushes at an SSD's rate rather than the 200 IOPS default,
// so that the pages the redo changed leave the buffer pool as fast as the disk takes
// them.
func recoveryTuning() []string {
	return []string{"--innodb-doublewrite=OFF", "--innodb-io-capacity=10000", "--innodb-io-capacity-max=20000"}
}

// recoverMySQL runs the stock mysqld's crash recovery on the copy in job.Dir.
func (s stockRecoverer) recoverMySQL(ctx context.Context, job RecoverJob) error {
	b, log := job.Backup, s.cfg.Log
	if job.Force != 0 {
		return errors.New("restoring some tables of a MySQL backup, or a chain whose incremental needs its base recovered first (one taken from a given LSN), is not supported yet: restore the whole backup, or take the incremental on the backup itself")
	}
	dir, _ := filepath.Abs(job.Dir)
	dir, back, err := visibleDir(dir)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer func() {
		if err := back(); err != nil {
			log.Error("prepare: the copy could not be renamed back", "err", err)
		}
	}()
	args, err := mysqlArgs(b.Settings, dir)
	if err != nil {
		return err
	}
	logfile := filepath.Join(dir, xtrabackup.LogFile)
	if err := mysqlredo.WriteRedoDir(logfile, b.Manifest.EndLSN, dir, "MySQL "+versionOnly(b.ServerVersion)); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := os.Remove(logfile); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	run, err := os.MkdirTemp("", "ferry-prep-")
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer os.RemoveAll(run)
	mem := s.cfg.UseMemory
	if mem == "" {
		mem = "256M"
	}
	args = append(args, "--innodb-buffer-pool-size="+mem)
	args = append(args, recoveryTuning()...)
	if err := os.Remove(job.ErrLog); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("prepare: remove the error log of an earlier run: %w", err)
	}
	t0 := time.Now()
	log.Info("prepare: running crash recovery with the stock server", "mysqld", job.Bin, "dir", dir, "end_lsn", b.Manifest.EndLSN)
	p, err := mysql.StartPrivate(ctx, mariadb.PrivateConfig{Binary: job.Bin, Datadir: dir, RunDir: run, Args: args, ErrLog: job.ErrLog})
	if err != nil {
		return fmt.Errorf("prepare %s: %w", dir, err)
	}
	if err := waitRollback(ctx, p.DB()); err != nil {
		p.Shutdown(ctx)
		return err
	}
	if err := b.readRecoveredGTIDs(ctx, p.DB(), log); err != nil {
		p.Shutdown(ctx)
		return err
	}
	if err := p.Shutdown(ctx); err != nil {
		return fmt.Errorf("prepare %s: %w", dir, err)
	}
	os.Remove(filepath.Join(dir, "ibtmp1"))
	os.Remove(job.ErrLog)
	log.Info("prepare: recovery finished", "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// visibleDir renames a staging directory whose name starts with a dot to the same name
// without it, for the recovery: mysqld does not find the undo tablespaces of a datadir
// whose own name starts with a dot (it takes it for a hidden directory and then tries
// to create them). back renames it again.
func visibleDir(dir string) (string, func() error, error) {
	base := filepath.Base(dir)
	if !strings.HasPrefix(base, ".") {
		return dir, func() error { return nil }, nil
	}
	visible := filepath.Join(filepath.Dir(dir), strings.TrimLeft(base, "."))
	if _, err := os.Lstat(visible); err == nil {
		return "", nil, fmt.Errorf("%s exists: move it away (ferry renames its staging directory there for the recovery)", visible)
	}
	if err := os.Rename(dir, visible); err != nil {
		return "", nil, err
	}
	return visible, func() error { return os.Rename(visible, dir) }, nil
}

// readRecoveredGTIDs takes the recovered copy's gtid_executed as the restore's GTID
// set. log_status reads the binlog position, the LSN and gtid_executed under one lock,
// but a transaction in its commit stage is in the binlog (below the position) and may
// be committed in InnoDB before its GTID joins gtid_executed: the copy holds it (the
// recovery commits it from the copied binlog), and its GTID too, so a replica set up
// from the end point's set would apply it twice.
func (b *Backup) readRecoveredGTIDs(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	var set string
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&set); err != nil {
		return fmt.Errorf("prepare: read the recovered gtid_executed: %w", err)
	}
	set = mysql.GTIDSet(set)
	if want := b.Manifest.Coordinates.GTIDBinlogPos; set != want {
		log.Info("prepare: the recovered copy holds more transactions than the end point's gtid_executed named (they were committing then); its own set is the restore's", "end_point", want, "recovered", set)
	}
	b.recoveredGTIDs = set
	return nil
}
