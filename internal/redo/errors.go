package redo

import (
	"errors"

	"github.com/ferry-backup/ferry/internal/setting"
)

// ErrLogOverwritten means the server reused part of its circular redo log
// before the tailer copied it; the copy cannot be completed.
var ErrLogOverwritten = errors.New("redo log was overwritten before it could be copied")

// ErrNeedKey means the log's file-level records are encrypted (innodb_encrypt_log=ON,
// FormatKey) and no LogCrypt was given to read them.
var ErrNeedKey = errors.New("the redo log is encrypted (innodb_encrypt_log=ON) and reading its file-level records needs the key file")

// ErrCorrupt means a mini-transaction below the server's flushed LSN failed
// validation twice (bad sequence byte, length or CRC-32C).
var ErrCorrupt = errors.New("corrupt redo log")

// OverwrittenError is returned by Tailer.Run when the server lapped the
// tailer. It wraps ErrLogOverwritten.
type OverwrittenError struct {
	Copied   uint64 // LSN copied so far
	Server   uint64 // the server's current LSN when the lap was seen
	Capacity uint64 // size of the circular part of ib_logfile0
}

// Error says what happened and what to do about it.
func (e *OverwrittenError) Error() string { return e.explain().Error() }

// Unwrap returns the explanation, which wraps ErrLogOverwritten and names the setting
// to lower (a front end spells it).
func (e *OverwrittenError) Unwrap() error { return e.explain() }

func (e *OverwrittenError) explain() error {
	return setting.Errorf("%w (copied to LSN %d, server at %d, capacity %d): raise innodb_log_file_size or reduce load/%s",
		ErrLogOverwritten, e.Copied, e.Server, e.Capacity, setting.Parallel)
}
