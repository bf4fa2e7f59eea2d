package redo

import (
	"path/filepath"
	"testing"
)

func TestLocalName(t *testing.T) {
	for abs, rel := range map[string]string{
		"/disk/db/t.ibd":         "db/t.ibd",
		"/d/db/p#P#p0.ibd":       "db/p#P#p0.ibd",
		"/other/disk/db/t.ibd":   "db/t.ibd",
		"/mnt/x/d b/t@0020x.ibd": "d b/t@0020x.ibd",
		"/a/b/c.ibd":             "b/c.ibd",
	} {
		got, err := LocalName(abs)
		if err != nil || len(got) != len(abs) || got[:2] != "./" || filepath.Clean(got) != rel {
			t.Errorf("LocalName(%q) = %q, %v; want a name of the same length that cleans to %q", abs, got, err, rel)
		}
	}
	if got, _ := LocalName("/disk/db/t.ibd"); got != "./////db/t.ibd" {
		t.Errorf("LocalName(/disk/db/t.ibd) = %q", got)
	}
	for _, bad := range []string{"/db/t.ibd", "/t.ibd", "/x/db/"} {
		if _, err := LocalName(bad); err == nil {
			t.Errorf("LocalName(%q) succeeded", bad)
		}
	}
}
