package mysqlredo

import (
	"errors"
	"fmt"

	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/setting"
)

// ErrRedoDisabled means the server ran with redo logging disabled (ALTER INSTANCE
// DISABLE INNODB REDO_LOG) during the copy: changes were not logged, so no copy of
// the log can make the data files consistent.
var ErrRedoDisabled = errors.New("redo logging is disabled on the server (ALTER INSTANCE DISABLE INNODB REDO_LOG): a hot backup needs it enabled for the whole copy")

// OverwrittenError is returned by Tailer.Run when the server consumed (recycled or
// removed) a redo file, or wrote over a block, before the copy read it. It wraps
// redo.ErrLogOverwritten, and errors.As also fills a *redo.OverwrittenError from it,
// so code written for the MariaDB tailer recognises it.
type OverwrittenError struct {
	Copied uint64 // LSN copied so far
	Server uint64 // the server's current LSN when the loss was seen
	File   string // the redo file that was consumed or reused, if known
	Detail string // what was seen
}

// Error says what happened and what to do about it.
func (e *OverwrittenError) Error() string { return e.explain().Error() }

// Unwrap returns the explanation, which wraps redo.ErrLogOverwritten and names the
// setting to lower (a front end spells it).
func (e *OverwrittenError) Unwrap() error { return e.explain() }

// As fills a *redo.OverwrittenError (Capacity unknown: 0) for callers that look for
// the MariaDB tailer's error type.
func (e *OverwrittenError) As(target any) bool {
	p, ok := target.(**redo.OverwrittenError)
	if ok {
		*p = &redo.OverwrittenError{Copied: e.Copied, Server: e.Server}
	}
	return ok
}

func (e *OverwrittenError) explain() error {
	from := ""
	if e.File != "" {
		from = " from " + e.File
	}
	return setting.Errorf("%w (copied to LSN %d%s, server at LSN %d: %s): raise innodb_redo_log_capacity, register the copy as a redo log consumer, or reduce load/%s",
		redo.ErrLogOverwritten, e.Copied, from, e.Server, e.Detail, setting.Parallel)
}

// corruptError builds the error for a block that stayed invalid below the server's
// flushed LSN.
func corruptError(lsn uint64, f *openFile, reason string) error {
	return fmt.Errorf("%w: block at LSN %d (offset %d of %s, below the server's flushed LSN): %s",
		ErrCorrupt, lsn, f.offset(lsn), f.Path, reason)
}
