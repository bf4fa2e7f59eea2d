package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// varsWanted are the server variables recorded for planning and for the recovery.
var varsWanted = []string{"server_uuid", "hostname", "port", "report_host", "report_port",
	"datadir", "innodb_page_size", "innodb_data_file_path", "innodb_data_home_dir",
	"innodb_undo_directory", "innodb_log_group_home_dir", "innodb_redo_log_capacity",
	"innodb_checksum_algorithm", "innodb_log_checksums", "innodb_redo_log_encrypt",
	"innodb_undo_log_encrypt", "lower_case_table_names", "log_bin", "log_bin_basename",
	"log_bin_index", "server_id", "gtid_mode", "enforce_gtid_consistency", "version_comment",
	"innodb_directories", "innodb_buffer_pool_size", "innodb_doublewrite_dir",
	"innodb_temp_tablespaces_dir", "log_error", "pid_file", "socket", "binlog_format",
	"default_table_encryption", "innodb_redo_log_archive_dirs"}

var versionRe = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// IsMySQL tells from SELECT VERSION() and @@version_comment whether the server is
// MySQL (or Percona Server for MySQL) rather than MariaDB.
func IsMySQL(version, comment string) bool {
	return !strings.Contains(strings.ToLower(version+" "+comment), "mariadb")
}

// Probe reads the version and variables of a MySQL server and checks that ferry can
// copy it: 8.0.30 or later (the #innodb_redo layout), its redo log on and unencrypted.
func Probe(ctx context.Context, db *sql.DB) (mariadb.Info, error) {
	info := mariadb.Info{Family: mariadb.FamilyMySQL}
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&info.Version); err != nil {
		return info, fmt.Errorf("read server version: %w", err)
	}
	vars, err := readVars(ctx, db)
	if err != nil {
		return info, err
	}
	info.Vars = vars
	if err := parseVersion(&info); err != nil {
		return info, err
	}
	if err := checkRedo(ctx, db, vars); err != nil {
		return info, err
	}
	info.Datadir = strings.TrimRight(vars["datadir"], "/")
	info.PageSize, _ = strconv.Atoi(vars["innodb_page_size"])
	if info.PageSize == 0 {
		info.PageSize = 16384
	}
	// The seam keys a server's identity on server_uid (MariaDB's name).
	info.Vars["server_uid"] = vars["server_uuid"]
	return info, nil
}

func parseVersion(info *mariadb.Info) error {
	m := versionRe.FindStringSubmatch(info.Version)
	if m == nil {
		return fmt.Errorf("server version %q is not one ferry knows: ferry supports MySQL 8.0.30 and later", info.Version)
	}
	info.Major, _ = strconv.Atoi(m[1])
	info.Minor, _ = strconv.Atoi(m[2])
	info.Patch, _ = strconv.Atoi(m[3])
	if info.Major < 8 || (info.Major == 8 && info.Minor == 0 && info.Patch < 30) {
		// One line, what is wrong and what to do: ferry backup prints it as it is, before
		// anything is copied (TestRefusesMySQL8015 runs it on 8.0.15).
		return fmt.Errorf("MySQL %d.%d.%d is not supported: its redo log is in ib_logfile0/1, and ferry reads only the #innodb_redo layout of MySQL 8.0.30 and later; upgrade the server to 8.0.30 or later, or back it up with Percona XtraBackup for its version", info.Major, info.Minor, info.Patch)
	}
	return nil
}

// checkRedo refuses a server whose redo ferry cannot copy: encrypted, or switched off
// (ALTER INSTANCE DISABLE INNODB REDO_LOG), which makes any hot copy unrecoverable.
func checkRedo(ctx context.Context, db *sql.DB, vars map[string]string) error {
	if on(vars["innodb_redo_log_encrypt"]) {
		return fmt.Errorf("the server encrypts its redo log (innodb_redo_log_encrypt=ON), which ferry cannot read on MySQL yet: turn it off for the backup or use Percona XtraBackup with the keyring")
	}
	if on(vars["innodb_undo_log_encrypt"]) {
		return fmt.Errorf("the server encrypts its undo tablespaces (innodb_undo_log_encrypt=ON), which ferry cannot copy on MySQL yet: use Percona XtraBackup with the keyring")
	}
	enabled, err := mariadb.StatusValue(ctx, db, "Innodb_redo_log_enabled")
	if err != nil {
		return err
	}
	if !on(enabled) {
		return fmt.Errorf("the server's redo log is disabled (Innodb_redo_log_enabled=OFF): no hot copy can be recovered; run ALTER INSTANCE ENABLE INNODB REDO_LOG first")
	}
	return nil
}

func on(v string) bool {
	v = strings.ToUpper(v)
	return v == "ON" || v == "1" || v == "YES" || v == "TRUE"
}

func readVars(ctx context.Context, db *sql.DB) (map[string]string, error) {
	q := "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('" + strings.Join(varsWanted, "','") + "')"
	rows, err := mariadb.QueryMaps(ctx, db, q)
	if err != nil {
		return nil, fmt.Errorf("read server variables: %w", err)
	}
	vars := map[string]string{}
	for _, r := range rows {
		vars[strings.ToLower(r["Variable_name"])] = r["Value"]
	}
	return vars, nil
}

// LSNs reads InnoDB's durable and current LSN (Innodb_redo_log_flushed_to_disk_lsn and
// Innodb_redo_log_current_lsn, 8.0.30+): a redo.ServerLSN.
type LSNs struct{ DB *sql.DB }

// LSNs returns the flushed and the current LSN.
func (s LSNs) LSNs(ctx context.Context) (flushed, current uint64, err error) {
	rows, err := mariadb.QueryMaps(ctx, s.DB, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_redo_log_flushed_to_disk_lsn','Innodb_redo_log_current_lsn')")
	if err != nil {
		return 0, 0, fmt.Errorf("read InnoDB LSNs: %w", err)
	}
	for _, r := range rows {
		v, _ := strconv.ParseUint(r["Value"], 10, 64)
		if strings.EqualFold(r["Variable_name"], "Innodb_redo_log_flushed_to_disk_lsn") {
			flushed = v
		} else {
			current = v
		}
	}
	if flushed == 0 || current == 0 {
		return 0, 0, fmt.Errorf("server does not report Innodb_redo_log_flushed_to_disk_lsn/Innodb_redo_log_current_lsn (MySQL 8.0.30+ does)")
	}
	return flushed, current, nil
}
