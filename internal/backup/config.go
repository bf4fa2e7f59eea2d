package backup

import (
	"io"
	"log/slog"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// Config is everything a backup job needs, filled by cmd/ferry from flags.
type Config struct {
	Conn      mariadb.ConnConfig
	TargetDir string
	Parallel  int   // copy workers; default number of cores
	ChunkSize int   // bytes per read; default 8 MiB
	Segment   int64 // large files are split into segments copied in parallel; default 256 MiB
	MaxRate   int64 // bytes/s cap on data file reads (0: unlimited), to spare the server's disk
	Log       *slog.Logger
	Progress  io.Writer // where progress is drawn (stderr)
	Terminal  bool      // Progress is a terminal
	Version   string    // ferry version, recorded in metadata
	Command   string    // command line without secrets, recorded in xtrabackup_info

}
