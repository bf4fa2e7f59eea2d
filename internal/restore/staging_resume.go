package restore

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/safepath"
	"github.com/ferry-backup/ferry/internal/setting"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// A source that keeps its staging directory for --resume (Caps().Resume: a repository
// backup, repo.Source) builds it with what this file gives: the directory named after
// the backup and locked while a run uses it, its journal (journal.go) of the objects
// written and verified and of the phases finished, and the files laid out at their
// sizes so that parts are written in any order.

// Resumer is a Source whose staging directory a later run continues (--resume): what
// it already holds is not needed again, and takes no new room.
type Resumer interface {
	// ResumeDir is the staging directory a restore into datadir continues ("": none).
	ResumeDir(datadir string) string
}

// ResumeStagingPath is the staging directory of backup id for a restore into datadir.
func ResumeStagingPath(datadir, id string) string { return placeFor(datadir).path("restore-" + id) }

// ResumeStaging returns the staging directory of backup id beside datadir, and its
// lock (held until closed or this process ends): new, or with resume the one an
// interrupted restore left.
func ResumeStaging(datadir, id string, resume bool) (string, *os.File, error) {
	return repoStaging(datadir, id, resume)
}

// repoStaging returns the staging directory of backup id beside datadir, and its lock:
// new, or with resume the one an interrupted restore left.
func repoStaging(datadir, id string, resume bool) (string, *os.File, error) {
	dir := ResumeStagingPath(datadir, id)
	_, err := os.Lstat(dir)
	switch {
	case err == nil:
		lock, err := lockStaging(dir)
		if err != nil {
			return "", nil, err
		}
		if !resume {
			lock.Close()
			return "", nil, setting.Errorf("an interrupted restore of backup %s is in %s: run again with %s to continue it (what it holds is verified, not downloaded again), or remove that directory", id, dir, setting.Resume)
		}
		if err := checkResumable(dir, id); err != nil {
			lock.Close()
			return "", nil, err
		}
		return dir, lock, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", filepath.Dir(dir), filecopy.WrapWriteErr(err))
	}
	// Mkdir, not MkdirAll: of two restores started at once, one creates it.
	if err := os.Mkdir(dir, 0o750); err != nil {
		return "", nil, fmt.Errorf("create staging directory %s: %w", dir, filecopy.WrapWriteErr(err))
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		return "", nil, err
	}
	lock, err := lockStaging(dir)
	return dir, lock, err
}

// lockStaging takes an exclusive lock on the staging directory dir until the file
// returned is closed or this process ends (however it ends), so that a second restore
// (a --resume started while the first still runs) never writes there too.
func lockStaging(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("staging directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, setting.Errorf("another ferry restore is running in %s: wait for it to end, or stop it and run this again with %s", dir, setting.Resume)
		}
		return nil, fmt.Errorf("lock the staging directory %s: %w", dir, err)
	}
	return f, nil
}

// checkResumable accepts for --resume only a real directory (no link) that holds ferry's
// journal of the same backup and no symbolic link anywhere.
func checkResumable(dir, id string) error {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return setting.Errorf("%s is not a directory: %s continues only a restore ferry left there; remove it", dir, setting.Resume)
	}
	if err := checkJournal(dir, id); err != nil {
		return err
	}
	if mariadb.DatadirInUse(dir) {
		return setting.Errorf("a mariadbd still runs on %s (left by a restore killed during its recovery or replay): stop it, then run this again with %s", dir, setting.Resume)
	}
	if err := safepath.CheckTree(dir); err != nil {
		return fmt.Errorf("cannot resume the restore in %s: %w", dir, err)
	}
	return nil
}

// LayOut creates every file of the backup in dir at its size (so that parts can be
// written in any order) and removes files that are not the backup's (left by a
// recovery that an earlier, interrupted run had started). The files of different
// directories are created by up to parallel workers at once: a backup of tens of
// thousands of tables spent seconds creating them one after another before the first
// byte was downloaded.
func LayOut(dir string, m *manifest.Manifest, parallel int) error {
	want := map[string]bool{journalName: true}
	byDir := map[string][]manifest.File{}
	var dirs []string
	for _, f := range m.Files {
		want[f.Path] = true
		d := path.Dir(f.Path)
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	tree := safepath.NewTree(dir)
	var g errgroup.Group
	g.SetLimit(max(parallel, 1))
	for _, d := range dirs {
		g.Go(func() error { return layOutDir(tree, byDir[d]) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return removeStrays(dir, want)
}

// layOutDir creates files (all in one directory) under tree at their sizes.
func layOutDir(tree *safepath.Tree, files []manifest.File) error {
	for _, f := range files {
		p, err := tree.MkdirParents(f.Path, 0o750)
		if err != nil {
			return filecopy.WrapWriteErr(err)
		}
		if err := layOutFile(p, f); err != nil {
			return err
		}
	}
	return nil
}

// layOutFile creates f at p at its size, its uncovered ranges holes.
func layOutFile(p string, f manifest.File) error {
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o640)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, filecopy.WrapWriteErr(err))
	}
	err = fh.Truncate(f.Size)
	if err == nil && f.Sparse {
		err = punchUncovered(fh, f)
	}
	fh.Close()
	if err != nil {
		return fmt.Errorf("size %s: %w", p, filecopy.WrapWriteErr(err))
	}
	return nil
}

// punchUncovered makes every range of a sparse file that no blob covers a hole again:
// zeros in the backup, where an earlier run's recovery, deltas or replay may have
// written pages that a resumed restore, which re-checks only the blobs, would keep.
func punchUncovered(fh *os.File, f manifest.File) error {
	punch := func(from, to int64) error {
		if to <= from {
			return nil
		}
		return unix.Fallocate(int(fh.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
	}
	var end int64
	for _, b := range f.Blobs { // in order, not overlapping
		if err := punch(end, b.RawOffset); err != nil {
			return err
		}
		end = max(end, b.RawOffset+b.RawSize)
	}
	return punch(end, f.Size)
}

// removeStrays deletes the files under dir that want does not name.
func removeStrays(dir string, want map[string]bool) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), scratchPrefix) {
			return filepath.SkipDir // a chain's incremental, kept for --resume
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if want[filepath.ToSlash(rel)] || rel == manifest.FileName {
			return nil
		}
		return os.Remove(p)
	})
}
