package restore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/safepath"
)

// A directory restored with --move gives its files to the restore: each is checked and
// renamed into the staging directory. Until recovery begins the move can be undone,
// so a failure puts every file back and the backup is whole again. Once recovery has
// begun to change the copy, the files stay in staging, which a run with --resume
// completes (crash recovery can always start again). A marker in the backup directory
// names where its files went, so that nothing takes the emptied backup for a damaged
// one, and a second restore cannot start on it.

const (
	// movedMarker, in the backup directory, holds the staging directory's path.
	movedMarker = "ferry-moved-to"
	// moveJournal, in the staging directory: moveHeader and the backup's directory,
	// then recoveringLine once the copy is about to change.
	moveJournal    = "ferry-move.journal"
	moveHeader     = "ferry restore --move of "
	recoveringLine = "recovering"
)

// consuming is a Source whose files move into staging: a failed restore must put them
// back or keep them for --resume, never remove them.
type consuming interface {
	// Changing records that the staging copy is about to differ from the backup's
	// files (recovery, a binlog replay): from then on the files cannot go back.
	Changing(staging string) error
	// Settle ends a failed restore without losing a file and returns err extended
	// with where the data is and what to do.
	Settle(staging string, err error) error
	// Finished is called once the restore put the copy in datadir.
	Finished(datadir string) error
}

// changing tells a consuming source that staging is about to change.
func changing(src Source, staging string) error {
	if c, ok := src.(consuming); ok {
		return c.Changing(staging)
	}
	return nil
}

// moveState is what the journal of a --move staging directory says.
type moveState struct {
	from       string // the backup directory
	recovering bool
}

// readMoveJournal reads the journal of the --move staging directory dir.
func readMoveJournal(dir string) (moveState, error) {
	b, err := os.ReadFile(filepath.Join(dir, moveJournal))
	if err != nil {
		return moveState{}, err
	}
	if len(b) > 64<<10 {
		return moveState{}, fmt.Errorf("%s is not a ferry journal (too long)", filepath.Join(dir, moveJournal))
	}
	lines := strings.Split(string(b), "\n")
	from, ok := strings.CutPrefix(lines[0], moveHeader)
	if !ok {
		return moveState{}, fmt.Errorf("%s is not a ferry restore --move journal: remove the directory", dir)
	}
	st := moveState{from: from}
	for _, l := range lines[1:] {
		st.recovering = st.recovering || l == recoveringLine
	}
	return st, nil
}

// moveStaging returns the staging directory of a --move restore into datadir: new, or
// with Resume the one an interrupted run left.
func (s *DirSource) moveStaging(datadir string) (string, bool, error) {
	from, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", false, err
	}
	dir := placeFor(datadir).path("move-" + s.moveID(from))
	st, err := readMoveJournal(dir)
	switch {
	case err == nil && !s.Resume:
		return "", false, fmt.Errorf("an interrupted restore --move of %s is in %s (the backup's files moved so far are there): run the same command with --resume to finish it", s.Dir, dir)
	case err == nil && st.from != from:
		return "", false, fmt.Errorf("%s holds a restore --move of %s, not of %s: finish that one first", dir, st.from, s.Dir)
	case err == nil:
		return dir, true, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", false, err
	}
	if _, err := os.Lstat(dir); err == nil {
		return "", false, fmt.Errorf("%s exists and is not ferry's: remove it", dir)
	}
	if dir, err = makeStaging(datadir, dir); err != nil {
		return "", false, err
	}
	if err := writeSynced(filepath.Join(dir, moveJournal), moveHeader+from+"\n"); err != nil {
		os.RemoveAll(dir)
		return "", false, err
	}
	if err := writeSynced(filepath.Join(from, movedMarker), dir+"\n"); err != nil {
		os.RemoveAll(dir)
		return "", false, fmt.Errorf("mark backup %s as being moved: %w", s.Dir, err)
	}
	return dir, true, nil
}

// moveID names a backup's --move staging directory: its manifest id, or a hash of its
// path for a mariadb-backup backup.
func (s *DirSource) moveID(abs string) string {
	if s.b != nil && s.b.Manifest != nil && plainName(s.b.Manifest.ID) {
		return s.b.Manifest.ID
	}
	return fmt.Sprintf("%08x", crc32.Checksum([]byte(abs), checksum.Table))
}

// checkMoved refuses a backup whose files an interrupted --move took.
func checkMoved(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, movedMarker))
	if err != nil {
		return nil
	}
	to := strings.TrimSpace(string(b[:min(len(b), 4096)]))
	if datadir, ok := strings.CutPrefix(to, consumedPrefix); ok {
		return fmt.Errorf("backup %s was consumed by restore --move: its files are the datadir %s now", dir, datadir)
	}
	return fmt.Errorf("the files of backup %s were moved into %s by an interrupted restore --move: finish it with the same command and --resume", dir, to)
}

// consumedPrefix starts the marker of a backup a --move restore consumed.
const consumedPrefix = "consumed by a restore into "

// Finished implements consuming: a moved backup's marker now says where its files
// went for good.
func (s *DirSource) Finished(datadir string) error {
	if !s.Move {
		return nil
	}
	p := filepath.Join(s.Dir, movedMarker)
	if err := os.Remove(p); err != nil {
		return err
	}
	return writeSynced(p, consumedPrefix+datadir+"\n")
}

// Changing implements consuming: it records in the journal that the files cannot go
// back any more.
func (s *DirSource) Changing(staging string) error {
	if !s.Move {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(staging, moveJournal), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("restore --move journal: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(recoveringLine + "\n"); err != nil {
		return fmt.Errorf("restore --move journal: %w", filecopy.WrapWriteErr(err))
	}
	return f.Sync()
}

// Settle implements consuming. A copy restore removes its staging directory (the
// backup is untouched). A move puts back what it moved, unless recovery had begun:
// then staging is kept for --resume.
func (s *DirSource) Settle(staging string, err error) error {
	if !s.Move {
		if rerr := os.RemoveAll(staging); rerr != nil {
			return fmt.Errorf("%w; the staging directory %s could not be removed (%v): remove it", err, staging, rerr)
		}
		return fmt.Errorf("%w; the partial copy was removed, and the backup and the datadir are as they were: run the restore again", err)
	}
	if st, jerr := readMoveJournal(staging); jerr == nil && st.recovering {
		return fmt.Errorf("%w; the backup's files are in %s, where recovery had begun on them (%s no longer holds them): fix the cause and run the same command with --resume to finish the restore", err, staging, s.Dir)
	}
	if merr := s.moveBack(staging); merr != nil {
		return fmt.Errorf("%w; putting the backup's files back from %s failed (%v): they are safe there; run the same command with --resume to finish the restore", err, staging, merr)
	}
	return fmt.Errorf("%w; every file moved so far is back in %s: the backup is whole", err, s.Dir)
}

// moveBack renames every file of staging back into the backup directory, then removes
// staging and the backup's marker.
func (s *DirSource) moveBack(staging string) error {
	var dirs []string
	err := filepath.WalkDir(staging, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(staging, p)
		if d.IsDir() {
			if rel != "." {
				dirs = append(dirs, p)
			}
			return nil
		}
		if rel == moveJournal {
			return nil
		}
		to, err := safepath.MkdirParents(s.Dir, filepath.ToSlash(rel), 0o750)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(to); err == nil {
			return fmt.Errorf("%s is in both the backup and %s", rel, staging)
		}
		return os.Rename(p, to)
	})
	if err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // children first
	for _, d := range dirs {
		os.Remove(d)
	}
	if err := manifest.SyncDir(s.Dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(staging, moveJournal)); err != nil {
		return err
	}
	if err := os.Remove(staging); err != nil {
		return err
	}
	return os.Remove(filepath.Join(s.Dir, movedMarker))
}

// writeSynced creates path with text and makes it durable (file and directory).
func writeSynced(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return filecopy.WrapWriteErr(err)
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return filecopy.WrapWriteErr(err)
	}
	return manifest.SyncDir(filepath.Dir(path))
}

// plainName tells whether id can name a directory as it is: short, letters, digits,
// '-', '_' and '.' only (a backup id read from a manifest is input).
func plainName(id string) bool {
	if id == "" || len(id) > 64 || strings.HasPrefix(id, ".") {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
