package apply

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/redo"
)

// logCreator is the creator ferry writes into the log of a rolled-forward datadir.
const logCreator = "ferry apply"

// replaceLog replaces dir's ib_logfile0 with an empty log checkpointed at lsn: written
// beside it, made durable, then renamed over it.
func replaceLog(dir string, lsn uint64) error {
	path := filepath.Join(dir, "ib_logfile0")
	tmp := path + ".ferry-apply"
	if err := os.WriteFile(tmp, redo.EmptyLog(lsn, logCreator), 0o640); err != nil {
		return fmt.Errorf("write the new redo log: %w", err)
	}
	if err := manifest.SyncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace the redo log: %w", err)
	}
	return manifest.SyncDir(dir)
}
