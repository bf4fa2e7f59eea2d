package testdb

import (
	"testing"
)

// TestGTIDForDomain picks one domain's GTID out of a position.
func TestGTIDForDomain(t *testing.T) {
	for _, c := range []struct {
		pos    string
		domain uint32
		want   string
	}{
		{"0-1-55,7-1-1234", 7, "7-1-1234"},
		{"0-1-55,\n7-1-1234", 0, "0-1-55"},
		{"0-1-55,17-1-3", 7, ""},
		{"", 7, ""},
	} {
		if got := GTIDForDomain(c.pos, c.domain); got != c.want {
			t.Errorf("GTIDForDomain(%q, %d) = %q, want %q", c.pos, c.domain, got, c.want)
		}
	}
}
