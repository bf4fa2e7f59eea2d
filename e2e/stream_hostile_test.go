//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/ferry-backup/ferry/internal/testdb/hostile"
)

// TestStreamOpeningThousandsOfFiles: a crafted stream that opens 2000 zstd files at once
// and closes none is refused by restore under --max-memory 16M with one line, leaves
// no datadir or staging dir, and the restore's peak RSS stays within the budget plus
// the fixed allowance for the files it decodes at once (16 × 5 MiB) and the runtime.
// Before the bound, such a stream grew the restore by ~2 MiB per file.
func TestStreamOpeningThousandsOfFiles(t *testing.T) {
	t.Parallel()
	tmp := testdb.ShortDir(t)
	file := filepath.Join(tmp, "open.xbs")
	if err := os.WriteFile(file, hostile.OpenFilesStream(2000), 0o600); err != nil {
		t.Fatal(err)
	}
	datadir := filepath.Join(tmp, "never")
	cmd := exec.Command(ferryBin, "restore", "--from", file, "--max-memory", "16M", "--datadir", datadir)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	rss := peak() << 10
	const bound = 16<<20 + 16*5<<20 + 48<<20
	t.Logf("peak RSS %d MiB (bound %d MiB)", rss>>20, bound>>20)
	if rss > bound {
		t.Errorf("restore peaked at %d MiB RSS, more than --max-memory 16M plus the allowance (%d MiB)", rss>>20, bound>>20)
	}
	last := lastLine(errb.String())
	if err == nil || !strings.HasPrefix(last, "ferry: ") || !strings.Contains(last, "files open at once") {
		t.Fatalf("restore of a stream opening 2000 files: %v, last line %q", err, last)
	}
	noDatadir(t, datadir)
}
