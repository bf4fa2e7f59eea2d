package backup_test

import (
	"testing"

	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// TestRunCtrlCDuringFinish: a backup cancelled (Ctrl-C) after the locks are released,
// while it writes its metadata before the manifest, is interrupted like one cancelled
// earlier: no manifest, the incomplete marker left, the lock sequence closed.
//
// It fails today: nothing between the end of BLOCK_COMMIT and Sink.Commit looks at the
// context (finish.go: finish writes the metadata and commits; sink.Dir's Commit ignores
// its ctx), so the cancelled backup returns no error and is committed.
func TestRunCtrlCDuringFinish(t *testing.T) {
	t.Parallel()
	for _, at := range []string{xtrabackup.MyCnfFile, xtrabackup.InfoFile} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			ctrlCAt(t, at, "END")
		})
	}
}
