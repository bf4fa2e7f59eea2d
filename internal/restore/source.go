package restore

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/progress"
)

// Source is where a restore reads a backup from: a backup directory, a stream, a
// repository, a clone's donor. Restore talks to it only through this interface and
// never asks which it has: it reads what the source can do from its Caps, as the
// backup engine reads a sink.Sink's. An incremental chain is a Source too: it fills the
// staging directory with the base and applies its deltas before returning.
type Source interface {
	// Name says where the backup comes from, for logs and messages.
	Name() string
	// Caps says what the source can do; it does not change once the source is made.
	Caps() Caps
	// Inspect reads what the source tells about the backup before any data moves, so
	// that a restore that cannot succeed fails before it writes anything. Only a
	// source whose Caps().Inspect is set supports it; any other returns ErrNoInspect.
	Inspect(ctx context.Context) (*Backup, error)
	// Staging creates the staging directory beside datadir (Caps().Resume: the one
	// a failed run kept, with --resume).
	Staging(datadir string) (dir string, err error)
	// Fill writes the backup's files into staging, every file verified against the
	// backup's checksums, and returns the backup: its metadata (server version,
	// settings, coordinates) and, in staging, the datadir's files at their paths.
	Fill(ctx context.Context, staging string, env Env) (*Backup, error)
}

// Caps is what a source can do.
type Caps struct {
	// Inspect: the source tells the backup before any data moves (a directory, a
	// repository), and the restore checks it then. Otherwise (a stream, a clone) the
	// backup is known only once Fill read it, and it is checked then.
	Inspect bool
	// Resume: a failed restore keeps the staging directory, and a run with --resume
	// continues it without reading again what it holds (a repository backup).
	// Otherwise a failed restore removes it: the source still holds everything.
	Resume bool
	// Consume: the source owns what its staging directory holds and implements
	// Consuming: restore tells it each phase, and a failed restore lets it decide
	// what stays (a backup directory, whose files a --move puts back; a clone that
	// can be resumed).
	Consume bool
	// Moves: Fill moves the backup's files instead of copying them, so that the
	// backup is gone once the restore ends (a directory restored with --move).
	Moves bool
	// Local: the backup's files can be read where they are, at random, and the
	// source implements LocalSource (a backup directory): a chain checks such a link in
	// place and applies it from there. Otherwise the files can be read once, in the order they come (a stream).
	Local bool
	// FollowLog: Fill writes the redo log into staging as it arrives and the source
	// implements Following, so that the restore parses it as it lands (a stream).
	FollowLog bool
}

// ErrNoInspect is what Inspect returns on a source whose Caps().Inspect is not set.
var ErrNoInspect = errors.New("this source tells nothing before its data (internal error: Caps().Inspect is not set)")

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
