package restore

import (
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// TestCheckLink: a chain starts with a full backup not prepared by ferry, each link
// is an incremental whose from_lsn is the previous link's to_lsn (and, between ferry
// backups, names it as its base).
func TestCheckLink(t *testing.T) {
	full := &Backup{Dir: "full", Manifest: &manifest.Manifest{ID: "f", Type: manifest.TypeFull, EndLSN: 500}}
	inc := func(id, base string, from, to uint64) *Backup {
		return &Backup{Dir: id, Manifest: &manifest.Manifest{ID: id, Type: manifest.TypeIncremental, EndLSN: to,
			Incremental: &manifest.Incremental{BaseID: base, BaseToLSN: from}}}
	}
	mbInc := &Backup{Dir: "mb", Incremental: true, Checkpoints: xtrabackup.Checkpoints{BackupType: xtrabackup.TypeIncremental, FromLSN: 800, ToLSN: 900}}
	prepared := &Backup{Dir: "p", Prepared: true, Manifest: &manifest.Manifest{ID: "p", Type: manifest.TypeFull, Prepared: &manifest.Prepared{}}}
	i1, i2 := inc("i1", "f", 500, 800), inc("i2", "i1", 800, 900)
	cases := []struct {
		i          int
		prev, b    *Backup
		wantSubstr string
	}{
		{0, nil, full, ""},
		{1, full, i1, ""},
		{2, i1, i2, ""},
		{2, i1, mbInc, ""},
		{0, nil, i1, "must be a full backup"},
		{0, nil, prepared, "prepared by ferry prepare"},
		{1, full, i2, "the chain is broken"},
		{1, i1, full, "is a full backup, not an incremental"},
		{2, i1, inc("x", "other", 800, 900), "was taken on backup other"},
	}
	for _, c := range cases {
		err := checkLink(c.i, c.prev, c.b)
		if c.wantSubstr == "" && err != nil || c.wantSubstr != "" && (err == nil || !strings.Contains(err.Error(), c.wantSubstr)) {
			t.Errorf("link %d %s after %v: %v, want %q", c.i, c.b.Dir, c.prev, err, c.wantSubstr)
		}
	}
}
