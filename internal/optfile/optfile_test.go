package optfile

import "testing"

func TestParseAsMariaDB(t *testing.T) {
	src := "# made by a tool\n!includedir /etc/mysql/conf.d\n[mysqld]\n" +
		"plugin-dir=\"/usr/lib/mysql/plugin/\"\n" +
		"loose-innodb_page_size = '4k' # a comment\n" +
		"skip-networking\n" +
		"path=a\\\\b\\sc\n" +
		"q=\"x # y\"\n" +
		"innodb_data_file_path=ibdata1:12M;ibdata2:10M:autoextend\n" +
		"innodb-undo-tablespaces=2\ninnodb_undo_tablespaces=3\n" +
		"file_key_management_filekey=\n" +
		"[client]\npassword=se;cret\n[mysqld-10.11]\nx=1\n"
	o, err := Parse([]byte(src), "mysqld")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"plugin_dir":                  "/usr/lib/mysql/plugin/",
		"innodb_page_size":            "4k",
		"skip_networking":             "true",
		"path":                        `a\b c`,
		"q":                           "x # y",
		"innodb_data_file_path":       "ibdata1:12M;ibdata2:10M:autoextend",
		"innodb_undo_tablespaces":     "3",
		"file_key_management_filekey": "",
	}
	for k, v := range want {
		if o[k] != v {
			t.Errorf("%s = %q, want %q", k, o[k], v)
		}
	}
	if _, ok := o["password"]; ok {
		t.Error("an option of [client] was read as [mysqld]'s")
	}
	if len(o) != len(want) {
		t.Errorf("got %d options %v, want %d", len(o), o, len(want))
	}
	c, err := Parse([]byte(src), "client", "client-mariadb")
	if err != nil || c["password"] != "se;cret" {
		t.Errorf("client password = %q, %v; want se;cret", c["password"], err)
	}
}

// FuzzParse: no option file, however malformed, makes Parse panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"[mysqld]\na=\n", "[mysqld]\nk='\n", "[mysqld]\n\"a\\", "[\n=\n", "[mysqld]\n!include x\nq=\"#\"#'"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		Parse(b, "mysqld")
	})
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "64k": 64 << 10, "100M": 100 << 20, " 2G ": 2 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "1.5G", "10T", "4294967297G", "9223372036854775807"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}
