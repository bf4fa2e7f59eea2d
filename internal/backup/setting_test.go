package backup

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/spool"
)

// cli spells the settings backup's errors name as ferry backup's flags.
var cli = setting.Names{setting.IncrementalBasedir: "--incremental-basedir", setting.MaxSpool: "--max-spool", setting.Tmpdir: "--tmpdir"}

// TestErrorsNameSettings: backup's errors name the setting, not the flag; the command
// line spells them as the flags it printed before.
func TestErrorsNameSettings(t *testing.T) {
	dir := t.TempDir()
	_, err := BaseFromDir(dir)
	if err == nil || !strings.HasPrefix(err.Error(), "incremental base directory "+dir+" is not a backup") {
		t.Fatalf("BaseFromDir of an empty directory: %v", err)
	}
	if got := setting.Render(err, cli); !strings.HasPrefix(got, "--incremental-basedir "+dir+" is not a backup") {
		t.Errorf("on the command line: %s", got)
	}
	err = (&job{}).explain(fmt.Errorf("spool: %w", spool.ErrFull), false)
	if got, want := setting.Render(err, cli), "give --max-spool more, or --tmpdir a directory with more space"; !strings.Contains(got, want) {
		t.Errorf("spool full on the command line: %s\nwant it to contain %q", got, want)
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("the library's text names a flag: %s", err)
	}
}
