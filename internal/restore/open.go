// Package restore prepares backups (crash recovery by the stock mariadbd run on a
// private socket) and restores them into a datadir through a staging directory that
// is renamed into place only at the end.
package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// Backup is a backup directory made by ferry or by mariadb-backup.
type Backup struct {
	Dir           string
	Source        string             // where it came from, if not Dir (a stream)
	Manifest      *manifest.Manifest // nil for a mariadb-backup backup
	Checkpoints   xtrabackup.Checkpoints
	ServerVersion string // e.g. 10.11.19-MariaDB-log
	Settings      map[string]string
	Prepared      bool
	// ForeignPrepared: a ferry backup prepared by another tool (mariadb-backup --prepare):
	// its files no longer match the manifest's checksums.
	ForeignPrepared bool
	// Incremental: the backup holds the pages changed since its base (.delta files);
	// it is restored only as the last link of a chain (ChainSource).
	Incremental bool
	// Chain is the number of backups a ChainSource applied to make this one (0: none).
	Chain int
	// Partial: the backup holds only some tables (a ferry manifest's partial, or
	// mariadb-backup's "partial = Y"); recovery leaves the others out.
	Partial bool
	// recoveredGTIDs is, for a MySQL backup, the gtid_executed its recovered copy holds:
	// exact, where the end point's (log_status) may miss transactions that were
	// committing at that instant (their GTIDs are in the copied binlog).
	recoveredGTIDs string
}

// Origin is where the backup was read from: its directory, or the stream.
func (b *Backup) Origin() string {
	if b.Source != "" {
		return b.Source
	}
	return b.Dir
}

// Tool names the program that made the backup.
func (b *Backup) Tool() string {
	if b.Manifest != nil {
		return "ferry"
	}
	return "mariadb-backup"
}

// Open inspects dir and refuses anything that is not a complete, full backup, and a
// backup whose files an interrupted restore --move took.
func Open(dir string) (*Backup, error) {
	return openDir(dir, false)
}

// openDir is Open; movedOK accepts a backup whose files a --move being resumed took.
func openDir(dir string, movedOK bool) (*Backup, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("backup directory %s does not exist", dir)
	}
	if err := checkMoved(dir); err != nil && !movedOK {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, manifest.IncompleteMarker)); err == nil {
		return nil, fmt.Errorf("backup in %s is incomplete (it was interrupted before its manifest was written): it cannot be prepared or restored; take a new backup", dir)
	}
	b := &Backup{Dir: dir}
	m, err := manifest.Read(dir)
	switch {
	case err == nil:
		b.Manifest, b.Prepared = m, m.Prepared != nil
		b.ServerVersion, b.Settings = m.Server.Version, m.Server.Settings
	case !errors.Is(err, manifest.ErrNotFound):
		return nil, err
	}
	cp, err := xtrabackup.ReadCheckpoints(dir)
	if err != nil {
		if b.Manifest != nil {
			return nil, fmt.Errorf("backup %s: %w", dir, err)
		}
		return nil, fmt.Errorf("%s is not a complete backup (no %s or %s): if a backup was being written there it was interrupted; take a new one", dir, manifest.FileName, xtrabackup.CheckpointsFile)
	}
	b.Checkpoints = cp
	if err := b.fromXtrabackup(); err != nil {
		return nil, err
	}
	b.ForeignPrepared = b.Manifest != nil && b.Manifest.Prepared == nil && b.Prepared
	return b, nil
}

// fromXtrabackup fills what a mariadb-backup backup records in its own files.
func (b *Backup) fromXtrabackup() error {
	switch b.Checkpoints.BackupType {
	case xtrabackup.TypeFull:
	case xtrabackup.TypeLogApplied:
		b.Prepared = true
	case xtrabackup.TypeIncremental:
		b.Incremental = true
	default:
		return fmt.Errorf("backup %s has type %q, which ferry does not know: it is not a backup ferry or mariadb-backup wrote", b.Dir, b.Checkpoints.BackupType)
	}
	if b.Manifest != nil {
		b.Partial = b.Manifest.Partial != nil
		return nil
	}
	info, err := xtrabackup.ReadKeyValues(filepath.Join(b.Dir, xtrabackup.InfoFile))
	if err != nil {
		return fmt.Errorf("backup %s: read %s: %w", b.Dir, xtrabackup.InfoFile, err)
	}
	b.ServerVersion = info["server_version"]
	b.Partial = info["partial"] == "Y"
	b.Settings, err = xtrabackup.ReadMyCnf(b.Dir)
	return err
}

// CheckMariadbd verifies that version (of the mariadbd that will run recovery) is of
// the same major.minor series as the backed-up server.
func (b *Backup) CheckMariadbd(bin, version string) error {
	want, _, ok := mariadb.Series(b.ServerVersion)
	if !ok {
		return fmt.Errorf("backup %s does not record its server version; cannot choose a mariadbd", b.Origin())
	}
	if got, _, ok := mariadb.Series(version); !ok || got != want {
		return setting.Errorf("backup was taken from MariaDB %s but %s is %s: install mariadb-server %s, pass %s (a binary or an installation directory) or name it in the option files (mariadbd-%s=)", strings.SplitN(b.ServerVersion, "-", 2)[0], bin, version, want, setting.Mariadbd, want)
	}
	return nil
}

// Options are the server options the backup's datadir needs: an allow-list of its
// settings, validated, and the key plugin with this host's key files if its server
// encrypted data at rest.
func (b *Backup) Options(k keyfile.Files) (ServerOptions, error) {
	o, err := serverOptions(b.Settings)
	if err != nil {
		return o, err
	}
	return o, o.UseKeys(k)
}

// prepareMariadbd finds the mariadbd for this backup and checks its version.
func (b *Backup) prepareMariadbd(ctx context.Context, spec string) (string, string, error) {
	series, _, _ := mariadb.Series(b.ServerVersion)
	bin, err := mariadb.FindMysqldFor(ctx, spec, series)
	if err != nil {
		return "", "", err
	}
	v, err := mariadb.MysqldVersion(ctx, bin)
	if err != nil {
		return "", "", err
	}
	return bin, v, b.CheckMariadbd(bin, v)
}
