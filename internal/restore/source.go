package restore

import (
	"context"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"io"
	"log/slog"

	"github.com/ferry-backup/ferry/internal/progress"
)

// Source is where a restore reads a backup from: a backup directory, a stream, a
// repository, a clone's donor. Restore talks to it only through this interface and
// never asks which it has; what differs between the ends lives in their Source.
// An incremental chain is a Source too: it fills the staging directory with the base
// and applies its deltas before returning.
type Source interface {
	// Name says where the backup comes from, for logs and messages.
	Name() string
	// Inspect reads what the source tells about the backup before any data moves, so
	// that a restore that cannot succeed fails before it writes anything. It returns
	// nil when nothing is known before the data (a stream).
	Inspect(ctx context.Context) (*Backup, error)
	// Staging creates the staging directory beside datadir. With keep set, a failed
	// restore leaves it in place, to be continued by a run with --resume.
	Staging(datadir string) (dir string, keep bool, err error)
	// Fill writes the backup's files into staging, every file verified against the
	// backup's checksums, and returns the backup: its metadata (server version,
	// settings, coordinates) and, in staging, the datadir's files at their paths.
	Fill(ctx context.Context, staging string, env Env) (*Backup, error)
}

// Env is what a Source may use to report while it fills the staging directory.
type Env struct {
	Log      *slog.Logger
	Progress io.Writer
	Terminal bool
	// RecoverBase runs crash recovery on the copy in dir without rolling back the
	// transactions it finds open (they may commit in a later link): a chain whose link
	// does not hold every page its base copied while it changed needs the base
	// recovered before the link is applied.
	RecoverBase func(ctx context.Context, b *Backup, dir string) error
	// Want, if set, names the files the restore needs; a source that can pick files
	// leaves the others out, one that cannot restores everything.
	Want func(path string) bool
	// Leave, if set, names pages of tablespace files that a later step writes (the
	// incrementals of a chain): a source that copies files leaves them unwritten, one
	// that cannot writes them all the same.
	Leave filecopy.Leave
}

// wants tells whether the restore needs the file at path.
func (e Env) wants(path string) bool { return e.Want == nil || e.Want(path) }

// Reporter starts a progress report for total bytes (-1 if unknown).
func (e Env) Reporter(total int64) *progress.Reporter {
	return progress.New(progress.Options{Label: "restore", Total: total, Terminal: e.Terminal, Out: e.Progress, Log: e.Log})
}
