package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/safepath"
	"golang.org/x/sync/errgroup"
)

// DirSource is a backup directory made by ferry or by mariadb-backup.
type DirSource struct {
	Dir string
	// Move moves the files out of the backup instead of copying them: the backup is
	// consumed.
	Move bool
	// Resume continues a Move that an earlier run left in its staging directory.
	Resume bool
	// recovering: the Move resumed had begun recovery, so every file is in staging
	// already and some may have changed (set by Staging).
	recovering bool
	// Parallel is how many files are copied at once (default: the cores).
	Parallel int
	b        *Backup // opened by Inspect
}

var (
	_ Source      = (*DirSource)(nil)
	_ LocalSource = (*DirSource)(nil)
)

// Name implements Source.
func (s *DirSource) Name() string { return s.Dir }

// Caps implements Source: a directory is read where it is and tells its backup before
// any data moves; with Move it gives its files to the restore.
func (s *DirSource) Caps() Caps {
	return Caps{Inspect: true, Local: true, Consume: true, Resume: s.Move, Moves: s.Move}
}

// Inspect implements Source: it opens the directory and refuses anything that is not
// a complete, full backup.
func (s *DirSource) Inspect(ctx context.Context) (*Backup, error) {
	b, err := openDir(s.Dir, s.Move && s.Resume)
	if err != nil {
		return nil, err
	}
	s.b = b
	return b, nil
}

// Staging implements Source: a new directory, removed if the restore fails; for a
// Move, the backup's own (see move.go).
func (s *DirSource) Staging(datadir string) (string, error) {
	if s.Move {
		return s.moveStaging(datadir)
	}
	return makeStaging(datadir, "")
}

// Fill implements Source: it copies (or moves) the datadir's files into staging in
// parallel, verifying each against the manifest.
func (s *DirSource) Fill(ctx context.Context, staging string, env Env) (*Backup, error) {
	if s.Move && s.recovering {
		env.Log.Info("resume: the backup's files were all moved and recovery had begun on them: it runs again", "staging", staging)
		return s.b, nil
	}
	all, err := s.files(ctx)
	if err != nil {
		return nil, err
	}
	var files []manifest.File
	for _, f := range all {
		if env.wants(f.Path) {
			files = append(files, f)
		}
	}
	if len(files) < len(all) {
		env.Log.Info("restoring only the files the tables need", "files", len(files), "of", len(all), "bytes", totalSize(files), "of", totalSize(all))
	}
	parallel := cmp.Or(s.Parallel, defaults.RestoreParallel())
	prog := env.Reporter(totalSize(files))
	err = copyFiles(ctx, s.b.Dir, staging, files, parallel, s.Move, env.Leave, prog)
	prog.Finish()
	if err != nil {
		return nil, err
	}
	return s.b, nil
}

// files opens the backup (once) and lists the files that go into a datadir.
func (s *DirSource) files(ctx context.Context) ([]manifest.File, error) {
	if s.b == nil {
		if _, err := s.Inspect(ctx); err != nil {
			return nil, err
		}
	}
	return s.b.datadirFiles()
}

// Verify implements LocalSource: it checks every file of the backup (that only
// names, if set) against its manifest where it is, in parallel, so that a chain
// applies the incremental from its own directory without copying it first.
func (s *DirSource) Verify(ctx context.Context, env Env, only func(path string) bool) (*Backup, error) {
	files, err := s.files(ctx)
	if err != nil {
		return nil, err
	}
	if only != nil {
		files = slices.DeleteFunc(files, func(f manifest.File) bool { return !only(f.Path) })
	}
	prog := env.Reporter(totalSize(files))
	defer prog.Finish()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(s.Parallel, defaults.RestoreParallel()))
	for _, f := range files {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return verifyInPlace(s.b.Dir, f, prog)
		})
	}
	return s.b, g.Wait()
}

// verifyInPlace checks one file of a backup directory against the manifest.
func verifyInPlace(dir string, f manifest.File, prog *progress.Reporter) error {
	p, err := safepath.Join(dir, f.Path)
	if err != nil {
		return fmt.Errorf("backup %s: %w", dir, err)
	}
	if f.CRC32C == "" {
		_, err := os.Stat(p)
		return err
	}
	n, crc, err := filecopy.FileCRC(p)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup file %s is missing: the backup is damaged", f.Path)
	}
	if err != nil {
		return fmt.Errorf("backup file %s: %w", f.Path, err)
	}
	prog.Add(n)
	return verify(f, n, crc)
}
