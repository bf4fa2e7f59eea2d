package restore

import (
	"strings"
	"testing"
)

func TestServerOptionsAllowList(t *testing.T) {
	o, err := serverOptions(map[string]string{
		"innodb_page_size": "4k", "innodb_checksum_algorithm": "FULL_CRC32",
		"innodb_data_file_path": "ibdata1:12M;ibdata2:10M:autoextend", "innodb_undo_tablespaces": "3",
		"innodb_log_file_size": "100663296", "innodb_undo_directory": "./",
		"init_file": "/tmp/evil.sql", "general_log_file": "/etc/x", "plugin_dir": "/tmp",
	})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(o.Args(), " ")
	want := "--innodb-checksum-algorithm=full_crc32 --innodb-data-file-path=ibdata1:12M;ibdata2:10M:autoextend --innodb-page-size=4096 --innodb-undo-tablespaces=3"
	if args != want {
		t.Errorf("args = %q, want %q", args, want)
	}
	if got := strings.Join(o.Ignored, ","); got != "general_log_file,init_file" {
		t.Errorf("ignored = %q", got)
	}
	cnf := string(o.Cnf("/var/lib/mysql"))
	if !strings.Contains(cnf, "[mysqld]\ndatadir=/var/lib/mysql\n") || !strings.Contains(cnf, "innodb_page_size=4096\n") || strings.Contains(cnf, "init_file") {
		t.Errorf("cnf = %q", cnf)
	}
}

func TestServerOptionsRefuseBadValues(t *testing.T) {
	bad := map[string]string{
		"innodb_page_size":          "4097",
		"innodb_checksum_algorithm": "crc32 --init-file=/tmp/x",
		"innodb_data_file_path":     "../../etc/passwd:12M",
		"innodb_undo_tablespaces":   "1000",
		"innodb_compression_level":  "x",
	}
	for k, v := range bad {
		if _, err := serverOptions(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: err = %v, want a refusal naming it", k, v, err)
		}
	}
	for _, v := range []string{"/abs/ibdata1:12M", "ibdata1:12M;/tmp/x:1M", "ibdata1", "ibdata1:12M:autoextend:max:1G"} {
		_, err := dataFilePath(v)
		if (err == nil) != (v == "ibdata1:12M:autoextend:max:1G") {
			t.Errorf("dataFilePath(%q) = %v", v, err)
		}
	}
}
