package mariadb

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Info is what ferry needs to know about a server before copying it.
type Info struct {
	// Family is the server family: "" for MariaDB, FamilyMySQL for MySQL (internal/mysql
	// probes it). What a backup records and what recovers it follow it.
	Family   string
	Version  string            // SELECT VERSION(), e.g. 10.11.19-MariaDB-0+deb12u1-log
	Major    int               // 10
	Minor    int               // 11
	Patch    int               // 19
	Vars     map[string]string // the server variables ferry reads (lower-case names)
	Datadir  string            // absolute, without trailing slash
	PageSize int               // innodb_page_size
	// KeyPlugin is the active encryption (key management) plugin, "" if none.
	KeyPlugin string
}

// varsWanted are the server variables recorded for planning and prepare.
// FamilyMySQL is Info.Family of a MySQL server.
const FamilyMySQL = "mysql"

var varsWanted = []string{"server_uid", "hostname", "port", "report_host", "report_port",
	"datadir", "innodb_page_size", "innodb_data_file_path", "innodb_data_home_dir",
	"innodb_undo_directory", "innodb_undo_tablespaces", "innodb_log_group_home_dir",
	"innodb_log_file_size", "innodb_checksum_algorithm", "innodb_compression_level",
	"innodb_encrypt_log", "innodb_encrypt_tables", "lower_case_table_names", "log_bin",
	"log_bin_basename", "relay_log_basename", "server_id", "aria_log_dir_path",
	"innodb_flush_method", "version_comment", "wsrep_on", "gtid_domain_id", "plugin_dir",
	"innodb_buffer_pool_size", "log_error", "pid_file", "socket", "general_log_file",
	"slow_query_log_file", "innodb_temp_data_file_path",
	"aria_encrypt_tables", "encrypt_tmp_files", "file_key_management_filename",
	"file_key_management_encryption_algorithm",
	// The key file's password (or FILE:path), read only to open the key file of an
	// encrypted redo log; never recorded.
	"file_key_management_filekey",
}

var versionRe = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// Series splits a MariaDB version ("10.11.19-MariaDB-log") into its major.minor series
// ("10.11"), which must match between a backup and the server that recovers it, and its
// release ("19"); ok is false if version does not start with three numbers.
func Series(version string) (series, release string, ok bool) {
	m := versionRe.FindStringSubmatch(version)
	if m == nil {
		return "", "", false
	}
	return m[1] + "." + m[2], m[3], true
}

// Probe reads the version, variables and key plugin and checks that ferry supports
// the server (its version and its encryption at rest).
func Probe(ctx context.Context, db *sql.DB) (Info, error) {
	var info Info
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&info.Version); err != nil {
		return info, fmt.Errorf("read server version: %w", err)
	}
	vars, err := readVars(ctx, db)
	if err != nil {
		return info, err
	}
	info.Vars = vars
	if err := info.parseVersion(); err != nil {
		return info, err
	}
	if info.KeyPlugin, err = readKeyPlugin(ctx, db); err != nil {
		return info, err
	}
	if err := info.checkEncryption(); err != nil {
		return info, err
	}
	info.Datadir = strings.TrimRight(vars["datadir"], "/")
	info.PageSize, _ = strconv.Atoi(vars["innodb_page_size"])
	if info.PageSize == 0 {
		info.PageSize = 16384
	}
	return info, nil
}

func (info *Info) parseVersion() error {
	m := versionRe.FindStringSubmatch(info.Version)
	isMaria := strings.Contains(strings.ToLower(info.Version+" "+info.Vars["version_comment"]), "mariadb")
	if m == nil || !isMaria {
		return fmt.Errorf("server version %q is not MariaDB: ferry supports MariaDB 10.8 and later (use xtrabackup for MySQL)", info.Version)
	}
	info.Major, _ = strconv.Atoi(m[1])
	info.Minor, _ = strconv.Atoi(m[2])
	info.Patch, _ = strconv.Atoi(m[3])
	if info.Major < 10 || (info.Major == 10 && info.Minor < 8) {
		return fmt.Errorf("MariaDB %d.%d.%d is not supported: its redo log format predates 10.8; use mariadb-backup of the same version", info.Major, info.Minor, info.Patch)
	}
	return nil
}

// Series returns "major.minor", e.g. "10.11".
func (info Info) Series() string { return fmt.Sprintf("%d.%d", info.Major, info.Minor) }

// ReplicaAddress is where replicas reach the server, as it says: @@report_host and
// @@report_port where set, else @@hostname and @@port; "" and 0 when unknown.
func (info Info) ReplicaAddress() (host string, port int) {
	host = cmp.Or(info.Vars["report_host"], info.Vars["hostname"])
	for _, v := range []string{info.Vars["report_port"], info.Vars["port"]} {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 65536 {
			return host, n
		}
	}
	return host, 0
}

func readVars(ctx context.Context, db *sql.DB) (map[string]string, error) {
	q := "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('" + strings.Join(varsWanted, "','") + "')"
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read server variables: %w", err)
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var k string
		var v sql.NullString
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read server variables: %w", err)
		}
		vars[strings.ToLower(k)] = v.String
	}
	return vars, rows.Err()
}

// StatusValue reads one global status variable.
func StatusValue(ctx context.Context, db *sql.DB, name string) (string, error) {
	var k, v string
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE ?", name).Scan(&k, &v)
	if err != nil {
		return "", fmt.Errorf("read status %s: %w", name, err)
	}
	return v, nil
}

// LSNSource reports InnoDB's durable and current LSN; it satisfies redo.ServerLSN.
type LSNSource struct{ DB *sql.DB }

// LSNs returns Innodb_lsn_flushed and Innodb_lsn_current.
func (s LSNSource) LSNs(ctx context.Context) (flushed, current uint64, err error) {
	rows, err := s.DB.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_lsn_flushed','Innodb_lsn_current')")
	if err != nil {
		return 0, 0, fmt.Errorf("read InnoDB LSNs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v uint64
		if err := rows.Scan(&k, &v); err != nil {
			return 0, 0, fmt.Errorf("read InnoDB LSNs: %w", err)
		}
		if strings.EqualFold(k, "Innodb_lsn_flushed") {
			flushed = v
		} else {
			current = v
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("read InnoDB LSNs: %w", err)
	}
	if flushed == 0 || current == 0 {
		return 0, 0, fmt.Errorf("server does not report Innodb_lsn_flushed/Innodb_lsn_current")
	}
	return flushed, current, nil
}
