package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/signing"
	"github.com/ferry-backup/ferry/internal/xbstream"
	"github.com/spf13/cobra"
)

// Exit codes: each class of failure has its own, so that a script can tell a typo
// from a server that refused ferry from a damaged backup (docs/operations.md).
const (
	exitOK        = 0
	exitFailure   = 1 // anything not in a class below
	exitUsage     = 2 // a flag, an argument or an option file to fix
	exitConnect   = 3 // the server could not be reached, or refused ferry (account, privileges)
	exitIntegrity = 4 // data failed a check: a damaged backup, stream, log or page
	exitPartial   = 5 // some of the work failed, the rest succeeded (verify: some backups bad)
	// An interrupted run exits 128 + the signal's number: 130 (SIGINT), 143 (SIGTERM).
)

// classed gives an error its exit code explicitly.
type classed struct {
	error
	code int
}

func (c classed) Unwrap() error { return c.error }

// withExitCode marks err with its exit code.
func withExitCode(err error, code int) error {
	if err == nil {
		return nil
	}
	return classed{err, code}
}

// usageError is a command-line mistake cobra or a verb found before any work.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// usageErr is a usage error saying msg.
func usageErr(msg string) error { return usageError{errors.New(msg)} }

// usagef is a usage error formatted as fmt.Errorf formats.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitCodeOf is the exit code of a run that ended with err (not interrupted).
func exitCodeOf(err error) int {
	var c classed
	var page *innodb.CorruptPageError
	var u usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &c):
		return c.code
	case errors.Is(err, mariadb.ErrConnect), errors.Is(err, mariadb.ErrRefused):
		return exitConnect
	case errors.Is(err, checksum.ErrMismatch), errors.Is(err, repo.ErrDamaged), errors.Is(err, redo.ErrCorrupt),
		errors.Is(err, delta.ErrCorrupt), errors.Is(err, binlog.ErrDamaged), errors.Is(err, xbstream.ErrCorrupt),
		errors.Is(err, signing.ErrUntrusted), errors.As(err, &page):
		return exitIntegrity
	case errors.As(err, &u), strings.HasPrefix(err.Error(), "unknown command"):
		return exitUsage
	}
	return exitFailure
}

// markUsage makes the flag and argument errors of cmd and its subcommands usage errors
// (cobra's own carry no type).
func markUsage(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if msg := err.Error(); strings.HasSuffix(msg, " --password") || strings.Contains(msg, "'p' in -p") {
			return refusePassword(c.Flags(), true) // mariabackup's bare --password or -p
		}
		return usageError{err}
	})
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		markUsage(c)
	}
}
