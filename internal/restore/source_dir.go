package restore

import (
	"context"
	"runtime"
)

// DirSource is a backup directory made by ferry or by mariadb-backup.
type DirSource struct {
	Dir string
	// Move moves the files out of the backup instead of copying them: the backup is
	// consumed.
	Move bool
	// Parallel is how many files are copied at once (default: the cores).
	Parallel int
	b        *Backup // opened by Inspect

}

// Name implements Source.
func (s *DirSource) Name() string { return s.Dir }

// Inspect implements Source: it opens the directory and refuses anything that is not
// a complete, full backup.
func (s *DirSource) Inspect(ctx context.Context) (*Backup, error) {
	b, err := Open(s.Dir)
	if err != nil {
		return nil, err
	}
	s.b = b
	return b, nil
}

// Staging implements Source: a new directory, removed if the restore fails.
func (s *DirSource) Staging(datadir string) (string, bool, error) {
	dir, err := makeStaging(datadir, "")
	return dir, false, err
}

// Fill implements Source: it copies (or moves) the datadir's files into staging in
// parallel, verifying each against the manifest.
func (s *DirSource) Fill(ctx context.Context, staging string, env Env) (*Backup, error) {
	if s.b == nil {
		if _, err := s.Inspect(ctx); err != nil {
			return nil, err
		}
	}
	files, err := s.b.datadirFiles()
	if err != nil {
		return nil, err
	}
	parallel := s.Parallel
	if parallel <= 0 {
		parallel = runtime.NumCPU()
	}
	prog := env.Reporter(totalSize(files))
	err = copyFiles(ctx, s.b.Dir, staging, files, parallel, s.Move, prog)
	prog.Finish()
	if err != nil {
		return nil, err
	}
	return s.b, nil
}
