package testdb

import (
	"strings"
	"testing"
)

// TestGTIDSetLast reads a source's last transaction out of MySQL GTID sets.
func TestGTIDSetLast(t *testing.T) {
	const bank = "0b5fd3a4-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
	for _, c := range []struct {
		set  string
		want int64
		ivs  string
	}{
		{"", 0, ""},
		{"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", 0, ""},
		{"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n" + bank + ":1-42", 42, "1-42"},
		{strings.ToUpper(bank) + ":1-3:5:7-9,\n3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", 9, "1-3:5:7-9"},
		{bank + ":tag:1-4", 4, "1-4"},
		{bank + ":17", 17, "17"},
	} {
		if got := GTIDSetLast(c.set, bank); got != c.want {
			t.Errorf("GTIDSetLast(%q) = %d, want %d", c.set, got, c.want)
		}
		if got := formatIntervals(gtidIntervals(c.set, bank)); got != c.ivs {
			t.Errorf("gtidIntervals(%q) = %s, want %s", c.set, got, c.ivs)
		}
	}
}

// TestInitArgs picks the options that shape a datadir.
func TestInitArgs(t *testing.T) {
	got := initArgs([]string{"--innodb_page_size=4k", "--max-connections=10", "--lower-case-table-names=1", "--innodb-data-file-path=ibdata1:20M:autoextend"})
	want := "--innodb_page_size=4k --lower-case-table-names=1 --innodb-data-file-path=ibdata1:20M:autoextend"
	if strings.Join(got, " ") != want {
		t.Errorf("initArgs = %q, want %s", got, want)
	}
}
