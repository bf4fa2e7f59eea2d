package restore

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/procs"

	"golang.org/x/sys/unix"
)

// A restore builds its copy in a staging directory on the datadir's own filesystem and
// swaps it in at the end, so that the swap is a set of renames and never a copy.
//
// Beside: the staging directory is PARENT/.DATADIR.ferry-NAME, when the datadir does not
// exist yet or lies on its parent's filesystem and the parent is writable.
//
// Inside: the staging directory is DATADIR/#sql-ferry-NAME, when the datadir is a mount
// point (an empty filesystem mounted at /var/lib/mysql, a Kubernetes volume) or its
// parent is not writable. MariaDB never takes a directory whose name starts with #sql
// for a database (it is its own temporary-name prefix), so neither the staging copy nor
// the old contents kept aside (#sql-ferry-old-TIME) show up as #mysql50# databases.
//
// When the datadir exists, the swap moves its contents, never the directory itself: a
// mount point cannot be renamed, and the directory keeps its owner, mode and labels.

// Names inside a datadir that a restore neither counts as contents nor moves.
const (
	// insidePrefix starts every entry ferry makes inside a datadir.
	insidePrefix = "#sql-ferry-"
	// lostFound is the directory mkfs makes at a filesystem's root.
	lostFound = "lost+found"
)

// place is where a restore into one datadir stages and keeps things.
type place struct {
	datadir string
	inside  bool // stage inside the datadir (a mount point)
}

// placeFor decides where a restore into datadir stages its copy.
func placeFor(datadir string) place {
	return place{datadir: datadir, inside: mustStageInside(datadir)}
}

// mustStageInside tells whether the datadir exists and its parent cannot hold the
// staging directory on the same filesystem.
func mustStageInside(datadir string) bool {
	var dp, pp unix.Stat_t
	if unix.Stat(datadir, &dp) != nil {
		return false
	}
	parent := filepath.Dir(datadir)
	if unix.Stat(parent, &pp) != nil {
		return true
	}
	return dp.Dev != pp.Dev || unix.Access(parent, unix.W_OK|unix.X_OK) != nil
}

// path returns the path of ferry's entry called name ("staging-X", "restore-ID",
// "old-TIME") for this datadir.
func (p place) path(name string) string {
	if p.inside {
		return filepath.Join(p.datadir, insidePrefix+name)
	}
	return filepath.Join(filepath.Dir(p.datadir), "."+filepath.Base(p.datadir)+".ferry-"+name)
}

// asidePath is where the datadir's old contents are kept (never deleted).
func (p place) asidePath(stamp string) string {
	if p.inside {
		return p.path("old-" + stamp)
	}
	return fmt.Sprintf("%s.ferry-old-%s", p.datadir, stamp)
}

// ignored tells whether an entry of a datadir is not the datadir's contents: the
// filesystem's lost+found, and what ferry keeps there (staging, old contents).
func ignored(name string) bool {
	return name == lostFound || strings.HasPrefix(name, insidePrefix) || strings.HasPrefix(name, ".ferry-")
}

// contents lists the datadir's entries that are its contents (see ignored); a
// missing datadir has none.
func contents(datadir string) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(datadir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("datadir %s: %w", datadir, err)
	}
	out := ents[:0]
	for _, e := range ents {
		if !ignored(e.Name()) {
			out = append(out, e)
		}
	}
	return out, nil
}

// removeStale removes the staging directories of restores into datadir that were
// killed (their process is gone): a staging-PID directory holds a copy of a backup that
// its source still holds whole. What a resumable restore keeps is named otherwise and
// stays.
func removeStale(datadir string, log *slog.Logger) {
	matches, _ := filepath.Glob(placeFor(datadir).path("staging-*"))
	for _, m := range matches {
		_, pid, _ := strings.Cut(filepath.Base(m), "staging-")
		n, err := strconv.Atoi(pid)
		if err != nil || procs.IsFerry(n) {
			continue
		}
		if err := os.RemoveAll(m); err != nil {
			log.Warn("could not remove the staging directory of a killed restore", "dir", m, "err", err)
			continue
		}
		log.Info("removed the staging directory of a killed restore (its backup still holds everything)", "dir", m)
	}
}
