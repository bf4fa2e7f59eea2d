package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// maxNamed bounds how many tables a refusal names.
const maxNamed = 5

// CheckFeatures refuses, before anything is copied, a server holding what ferry does
// not copy from MySQL yet: keyring-encrypted tablespaces, transparent page
// compression (COMPRESSION=), and tablespaces outside datadir. Each refusal is one
// line naming the first tables.
func CheckFeatures(ctx context.Context, db *sql.DB, datadir string) error {
	enc, err := names(ctx, db, "SELECT NAME FROM information_schema.INNODB_TABLESPACES WHERE ENCRYPTION='Y' ORDER BY NAME")
	if err != nil {
		return err
	}
	if len(enc) > 0 {
		return fmt.Errorf("keyring-encrypted tablespaces (%s) cannot be copied by ferry on MySQL yet: decrypt them (ALTER TABLE ... ENCRYPTION='N') or use Percona XtraBackup with the keyring", list(enc))
	}
	comp, err := names(ctx, db, `SELECT CONCAT(TABLE_SCHEMA,'.',TABLE_NAME) FROM information_schema.TABLES
		WHERE CREATE_OPTIONS LIKE '%COMPRESSION=%' AND CREATE_OPTIONS NOT LIKE '%COMPRESSION="None"%' AND CREATE_OPTIONS NOT LIKE '%COMPRESSION=''None''%'
		ORDER BY 1`)
	if err != nil {
		return err
	}
	if len(comp) > 0 {
		return fmt.Errorf("tables with transparent page compression (%s) cannot be copied by ferry on MySQL yet: rebuild them with COMPRESSION='None' (ROW_FORMAT=COMPRESSED is supported)", list(comp))
	}
	return checkOutside(ctx, db, datadir)
}

// checkOutside refuses tablespaces whose file lies outside the datadir (DATA DIRECTORY
// tables, general tablespaces and undo tablespaces elsewhere).
func checkOutside(ctx context.Context, db *sql.DB, datadir string) error {
	rows, err := mariadb.QueryMaps(ctx, db, "SELECT DISTINCT FILE_NAME FROM information_schema.FILES WHERE ENGINE='InnoDB' AND FILE_TYPE IN ('TABLESPACE','UNDO LOG') AND FILE_NAME IS NOT NULL")
	if err != nil {
		return fmt.Errorf("list tablespace files: %w", err)
	}
	var out []string
	for _, r := range rows {
		f := r["FILE_NAME"]
		if !filepath.IsAbs(f) || strings.HasPrefix(filepath.Clean(f)+"/", filepath.Clean(datadir)+"/") {
			continue
		}
		out = append(out, f)
	}
	if len(out) > 0 {
		return fmt.Errorf("tablespace files outside the datadir (%s) are not copied by ferry on MySQL yet: move them into the datadir or use Percona XtraBackup", list(out))
	}
	return nil
}

func names(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("check table features: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("check table features: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func list(names []string) string {
	if len(names) > maxNamed {
		return strings.Join(names[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNamed)
	}
	return strings.Join(names, ", ")
}
