package restore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// InPlace marks a restore into a datadir a server runs in: a Galera joiner's mariadbd
// waits for its state transfer inside the datadir (its working directory), whose
// entries Local names (the node's own Galera state, its logs) stay where they are.
// Every restore into an existing datadir swaps its contents (see staging.go); InPlace
// only adds the entries that stay.
type InPlace struct {
	Local func(name string) bool
}

// swapContents moves the datadir's contents (its entries but the ignored and the local
// ones) into aside, and the staging directory's entries in, then removes the emptied
// staging directory. On failure it puts back what it moved. It returns aside, or ""
// when the datadir had no contents to move.
func swapContents(staging, datadir, aside string, local func(string) bool) (string, error) {
	var undo []func() error
	rollback := func(err error) (string, error) {
		var failed []error
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				failed = append(failed, uerr)
			}
		}
		if len(failed) > 0 { // the datadir is half swapped: say where everything is
			return aside, swappedError{fmt.Errorf("%w; putting the datadir back failed too (%w): its old files are in %s and the datadir, the restored ones in %s and the datadir", err, errors.Join(failed...), aside, staging)}
		}
		os.Remove(aside)
		return "", err
	}
	old, err := contents(datadir)
	if err != nil {
		return "", err
	}
	moved := false
	for _, e := range old {
		if local != nil && local(e.Name()) {
			continue
		}
		if !moved {
			if err := os.Mkdir(aside, 0o700); err != nil {
				return "", fmt.Errorf("make a directory for the old datadir's files: %w", err)
			}
			moved = true
		}
		from, to := filepath.Join(datadir, e.Name()), filepath.Join(aside, e.Name())
		if err := os.Rename(from, to); err != nil {
			return rollback(fmt.Errorf("move %s aside: %w", from, err))
		}
		undo = append(undo, func() error { return os.Rename(to, from) })
	}
	fresh, err := os.ReadDir(staging)
	if err != nil {
		return rollback(fmt.Errorf("read staging directory %s: %w", staging, err))
	}
	for _, e := range fresh {
		from, to := filepath.Join(staging, e.Name()), filepath.Join(datadir, e.Name())
		if _, err := os.Lstat(to); err == nil {
			return rollback(fmt.Errorf("the datadir keeps %s (a node's own file), which the copy has too: remove it from one of them", to))
		}
		if err := os.Rename(from, to); err != nil {
			return rollback(fmt.Errorf("move %s into the datadir: %w", from, err))
		}
		undo = append(undo, func() error { return os.Rename(to, from) })
	}
	if err := os.Remove(staging); err != nil && !errors.Is(err, os.ErrNotExist) {
		return rollback(fmt.Errorf("remove the emptied staging directory: %w", err))
	}
	if !moved {
		aside = ""
	}
	if err := manifest.SyncDir(datadir); err != nil {
		return aside, swappedError{err}
	}
	if aside != "" {
		if err := manifest.SyncDir(filepath.Dir(aside)); err != nil {
			return aside, swappedError{err}
		}
	}
	return aside, nil
}

// swappedError is an error met once the restored copy is in the datadir (or the
// datadir half swapped): a failed restore then neither removes nor moves back
// anything, and the message says where the files are.
type swappedError struct{ error }

// Unwrap returns the error met.
func (e swappedError) Unwrap() error { return e.error }

// PutBack undoes a restore into datadir whose old contents were kept in aside ("" if
// the datadir had none): the restored contents move into a new directory beside the
// old ones (returned, kept for diagnosis) and the old contents move back. Only renames:
// the datadir may be a mount point.
func PutBack(datadir, aside string) (string, error) {
	pl := placeFor(datadir)
	failed := pl.path("failed-" + time.Now().Format("20060102T150405"))
	if !pl.inside {
		failed = fmt.Sprintf("%s.ferry-failed-%s", datadir, time.Now().Format("20060102T150405"))
	}
	if err := moveEntries(datadir, failed, nil); err != nil {
		return "", fmt.Errorf("move the restored files into %s: %w", failed, err)
	}
	if aside == "" {
		return failed, nil
	}
	if err := moveEntries(aside, datadir, nil); err != nil {
		return failed, fmt.Errorf("move the previous datadir's files back from %s: %w", aside, err)
	}
	if err := os.Remove(aside); err != nil {
		return failed, err
	}
	return failed, manifest.SyncDir(datadir)
}

// moveEntries renames the contents of from (see contents) into to, created if need be.
func moveEntries(from, to string, local func(string) bool) error {
	ents, err := contents(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o750); err != nil {
		return err
	}
	for _, e := range ents {
		if local != nil && local(e.Name()) {
			continue
		}
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return manifest.SyncDir(to)
}
