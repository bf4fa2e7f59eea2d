package restore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"golang.org/x/sys/unix"
)

// InPlace swaps the contents of a datadir rather than the directory: a Galera joiner's
// mariadbd waits for its state transfer inside the datadir (its working directory), so
// the directory itself must stay. The old entries move into DATADIR.ferry-old-TIME
// beside it (kept, never deleted) or, when this process may not write there or it is
// another filesystem (the datadir is a mount point), into DATADIR/.ferry-old-TIME; the
// staging directory's entries move in; the entries Local names stay where they are (the
// node's own Galera state, its logs), and so do ferry's own ".ferry-" entries.
type InPlace struct {
	Local func(name string) bool
}

// swapContents moves the datadir's entries (but the local ones) aside and the staging
// directory's in, and removes the emptied staging directory. On failure it puts back
// what it moved. It returns the directory the old entries went to ("" if none).
func swapContents(staging, datadir string, local func(string) bool) (string, error) {
	aside := asideDir(datadir, time.Now().Format("20060102T150405"))
	var undo []func() error
	rollback := func(err error) (string, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		os.Remove(aside)
		return "", err
	}
	old, err := os.ReadDir(datadir)
	if err != nil {
		return "", fmt.Errorf("read datadir %s: %w", datadir, err)
	}
	moved := false
	for _, e := range old {
		if strings.HasPrefix(e.Name(), ".ferry-") || (local != nil && local(e.Name())) {
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
		return aside, err
	}
	if aside != "" {
		return aside, manifest.SyncDir(filepath.Dir(aside))
	}
	return "", nil
}

// asideDir is where a contents swap keeps the old entries: beside the datadir when this
// process may write there on the same filesystem (renames stay renames), else inside it.
func asideDir(datadir, stamp string) string {
	parent := filepath.Dir(datadir)
	var dp, pp unix.Stat_t
	if unix.Stat(datadir, &dp) == nil && unix.Stat(parent, &pp) == nil && dp.Dev == pp.Dev && unix.Access(parent, unix.W_OK|unix.X_OK) == nil {
		return fmt.Sprintf("%s.ferry-old-%s", datadir, stamp)
	}
	return filepath.Join(datadir, ".ferry-old-"+stamp)
}
