package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/timefmt"
)

// restore's help shows --to-time with an offset and with a zone name; every --to-time
// in the help (restore's and binlog-archive's) means the same instant whatever the
// host's zone.
func TestRestoreHelpToTime(t *testing.T) {
	ex := newRestoreCmd(&globals{}).Example
	all := ex + newBinlogArchiveCmd(&globals{}).Example
	got := regexp.MustCompile(`--to-time '([^']*)'`).FindAllStringSubmatch(all, -1)
	var offset, name bool
	for _, m := range got {
		utc, err1 := timefmt.Parse(m[1], time.UTC)
		far, err2 := timefmt.Parse(m[1], time.FixedZone("UTC+9", 9*3600))
		if err1 != nil || err2 != nil || !utc.Equal(far) {
			t.Errorf("--to-time %q depends on the host's zone (%v, %v)", m[1], err1, err2)
		}
		offset = offset || regexp.MustCompile(` [+-]\d\d:\d\d$`).MatchString(m[1])
		name = name || regexp.MustCompile(` [A-Za-z]+/[A-Za-z_]+$`).MatchString(m[1])
	}
	if !offset || !name {
		t.Errorf("restore's examples of --to-time: offset %v, zone name %v, want both:\n%s", offset, name, ex)
	}
}
