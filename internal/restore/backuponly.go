package restore

import (
	"errors"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// removeBackupOnlyFiles drops from a staging directory what is not part of a datadir:
// a backup's metadata and a repository restore's journal.
func removeBackupOnlyFiles(dir string) error {
	for _, name := range []string{manifest.FileName, xtrabackup.MyCnfFile, xtrabackup.CheckpointsFile, xtrabackup.BinlogInfoFile, xtrabackup.GaleraInfoFile, xtrabackup.SlaveInfoFile, journalName, xtrabackup.LogFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
