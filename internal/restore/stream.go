package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/stream"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// restoreStream unpacks cfg.Stream (ferry's stream or mariadb-backup --stream=xbstream)
// straight into a staging directory beside the datadir, verifies it, prepares it and
// renames it into place. Any failure removes the staging directory: the datadir is
// never touched before the final rename.
func restoreStream(ctx context.Context, cfg Config, datadir string) (*Result, error) {
	bin, err := mariadb.FindMysqld(cfg.Mariadbd)
	if err != nil {
		return nil, err
	}
	return inStaging(cfg, datadir, func(staging string, owner ownerIDs) (*Result, error) {
		return restoreStreamInto(ctx, cfg, staging, bin, owner, datadir)
	})
}

func restoreStreamInto(ctx context.Context, cfg Config, staging, bin string, owner ownerIDs, datadir string) (*Result, error) {
	var got *stream.Unpacked
	var err error
	if cfg.Fill != nil {
		cfg.StreamName = cfg.FillName
		if got, err = cfg.Fill(ctx, staging); err != nil {
			return nil, err // the filler's errors name their source
		}
	} else {
		cfg.Log.Info("restoring from a stream", "from", cfg.StreamName, "staging", staging, "memory_budget_mib", cfg.MaxMemory>>20)
		prog := progress.New(progress.Options{Label: "restore", Total: -1, Terminal: cfg.Terminal, Out: cfg.Progress, Log: cfg.Log})
		got, err = stream.Unpack(ctx, cfg.Stream, staging, stream.UnpackOptions{Identities: cfg.Identities, MaxMemory: cfg.MaxMemory, Progress: prog.Add})
		prog.Finish()
	}
	if err != nil {
		return nil, fmt.Errorf("restore from %s: %w", cfg.StreamName, err)
	}
	if err := verifyStream(staging, got); err != nil {
		return nil, fmt.Errorf("restore from %s: %w", cfg.StreamName, err)
	}
	b, err := Open(staging)
	if err != nil {
		return nil, fmt.Errorf("restore from %s: %w", cfg.StreamName, err)
	}
	b.Source = cfg.StreamName
	cfg.Log.Info("files received and verified against the manifest", "files", len(got.Files), "made_by", b.Tool())
	if !b.Prepared {
		version, err := mariadb.MysqldVersion(ctx, bin)
		if err != nil {
			return nil, err
		}
		if err := b.CheckMariadbd(bin, version); err != nil {
			return nil, err
		}
		if err := recoverDir(ctx, b, staging, errLogBeside(datadir), bin, cfg.UseMemory, cfg.Keys, cfg.Log); err != nil {
			return nil, err
		}
	}
	coords := b.coordinates()
	if err := removeBackupOnlyFiles(staging); err != nil {
		return nil, err
	}
	return finishStaging(b, coords, staging, datadir, owner, cfg)
}

// verifyStream checks a ferry stream against its manifest (every file present with its
// size and CRC-32C, nothing else), and that a stream without one is a complete
// mariadb-backup stream.
func verifyStream(dir string, got *stream.Unpacked) error {
	m, err := manifest.Read(dir)
	if errors.Is(err, manifest.ErrNotFound) {
		return verifyForeignStream(dir)
	}
	if err != nil {
		return err
	}
	want := map[string]bool{manifest.FileName: true}
	for _, f := range m.Files {
		want[f.Path] = true
		g, ok := got.Files[f.Path]
		if !ok {
			return fmt.Errorf("the stream lacks %s, which its manifest lists: the stream is damaged", f.Path)
		}
		if g.Size != f.Size || checksum.Hex(g.CRC) != f.CRC32C {
			return fmt.Errorf("%s (stored as %s) does not match the manifest: %d bytes with CRC-32C %s, expected %d bytes with %s: the stream was damaged before it was framed", f.Path, g.Stored, g.Size, checksum.Hex(g.CRC), f.Size, f.CRC32C)
		}
	}
	var extra []string
	for p := range got.Files {
		if !want[p] {
			extra = append(extra, p)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("the stream holds %s, which its manifest does not list: it is not one backup", extra[0])
	}
	return nil
}

// verifyForeignStream accepts a stream without a ferry manifest only if it is a whole
// mariadb-backup stream: ferry's own streams end with their manifest.
func verifyForeignStream(dir string) error {
	info, err := xtrabackup.ReadKeyValues(filepath.Join(dir, xtrabackup.InfoFile))
	if err == nil && info["tool_name"] == "ferry" {
		return errors.New("the stream ends before ferry's manifest (truncated: the backup was interrupted or the connection dropped)")
	}
	if _, err := os.Stat(filepath.Join(dir, xtrabackup.CheckpointsFile)); err != nil {
		return fmt.Errorf("the stream has neither a ferry manifest nor %s: it is truncated or not a backup", xtrabackup.CheckpointsFile)
	}
	return nil
}

// removeBackupOnlyFiles drops from an unpacked stream what is not part of a datadir.
func removeBackupOnlyFiles(dir string) error {
	for _, name := range []string{manifest.FileName, xtrabackup.MyCnfFile, xtrabackup.CheckpointsFile, xtrabackup.BinlogInfoFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
