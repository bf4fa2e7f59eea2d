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
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// A directory restored with --move gives its files to the restore: each is checked and
// renamed into the staging directory. Until recovery begins the move can be undone,
// so a failure puts every file back and the backup is whole again. Once recovery has
// begun to change the copy, the files stay in staging, which a run with --resume
// completes (crash recovery can always start again). A marker in the backup directory
// names where its files went, so that nothing takes the emptied backup for a damaged
// one, and a second restore cannot start on it.

var _ Consuming = (*DirSource)(nil)

const (
	// movedMarker, in the backup directory, holds the staging directory's path.
	movedMarker = "ferry-moved-to"
	// The journal of a move sits beside its staging directory (STAGING.journal, never
	// inside: nothing of it may reach the datadir): moveHeader and the backup's
	// directory, then one line per phase begun.
	journalExt = ".journal"
	moveHeader = "ferry restore --move of "
	// phaseRecovering: the copy is about to change (recovery, a replay); the files
	// cannot go back any more.
	phaseRecovering = "recovering"
	// phaseSwapping: the copy is being moved into the datadir; phaseUnswapped: that
	// swap was undone, the copy is whole in staging again.
	phaseSwapping  = "swapping"
	phaseUnswapped = "swap undone"
)

// Consuming is a Source whose Caps().Consume is set: it owns what its staging
// directory holds (a directory
// restored with --move, whose files move there; a clone that can be resumed): restore
// tells it each phase, and a failed restore lets it decide what stays, never removing
// the staging directory itself.
type Consuming interface {
	// Phase records that a phase begins on the staging copy: phaseRecovering (the
	// copy is about to differ from the backup's files: they cannot go back), then
	// phaseSwapping (the copy moves into the datadir).
	Phase(staging, phase string) error
	// Settle ends a failed restore without losing a file and returns err extended
	// with where the data is and what to do.
	Settle(staging string, err error) error
	// Finished is called once the restore put the copy in datadir.
	Finished(staging, datadir string) error
}

// phase tells a consuming source (Caps().Consume) that a phase begins on staging.
func phase(src Source, staging, name string) error {
	if !src.Caps().Consume {
		return nil
	}
	return src.(Consuming).Phase(staging, name)
}

// moveState is what the journal of a --move staging directory says.
type moveState struct {
	from       string // the backup directory
	recovering bool
	swapping   bool
}

// readMoveJournal reads the journal of the --move staging directory dir.
func readMoveJournal(dir string) (moveState, error) {
	b, err := os.ReadFile(dir + journalExt)
	if err != nil {
		return moveState{}, err
	}
	if len(b) > 64<<10 {
		return moveState{}, fmt.Errorf("%s is not a ferry journal (too long)", dir+journalExt)
	}
	lines := strings.Split(string(b), "\n")
	from, ok := strings.CutPrefix(lines[0], moveHeader)
	if !ok {
		return moveState{}, setting.Errorf("%s is not a ferry restore %s journal", dir+journalExt, setting.Move)
	}
	st := moveState{from: from}
	for _, l := range lines[1:] { // the last phase begun counts (a swap undone goes back)
		switch l {
		case phaseRecovering:
			st.recovering, st.swapping = true, false
		case phaseSwapping:
			st.swapping = true
		case phaseUnswapped:
			st.swapping = false
		}
	}
	return st, nil
}

// moveStaging returns the staging directory of a --move restore into datadir: new, or
// with Resume the one an interrupted run left.
func (s *DirSource) moveStaging(datadir string) (string, error) {
	from, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", err
	}
	dir := placeFor(datadir).path("move-" + s.moveID(from))
	st, err := readMoveJournal(dir)
	switch {
	case err == nil && st.swapping:
		return "", setting.Errorf("a restore %s of %s was stopped while it moved its copy into %s: the restored files are split between %s and the datadir (nothing is lost): move the entries left in %s into the datadir, then remove it and %s", setting.Move, s.Dir, datadir, dir, dir, dir+journalExt)
	case err == nil && !s.Resume:
		return "", setting.Errorf("an interrupted restore %s of %s is in %s (the backup's files moved so far are there): run the same command with %s to finish it", setting.Move, s.Dir, dir, setting.Resume)
	case err == nil && st.from != from:
		return "", setting.Errorf("%s holds a restore %s of %s, not of %s: finish that one first", dir, setting.Move, st.from, s.Dir)
	case err == nil:
		s.recovering = st.recovering
		return dir, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	if _, err := os.Lstat(dir); err == nil {
		return "", setting.Errorf("%s exists without the journal of a ferry restore %s: it is not ferry's, or a restore %s was stopped at its very end (then it is the restored datadir's last files: move them into %s)", dir, setting.Move, setting.Move, datadir)
	}
	if dir, err = makeStaging(datadir, dir); err != nil {
		return "", err
	}
	if err := writeSynced(dir+journalExt, moveHeader+from+"\n"); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := writeSynced(filepath.Join(from, movedMarker), dir+"\n"); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("mark backup %s as being moved: %w", s.Dir, err)
	}
	return dir, nil
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
		return setting.Errorf("backup %s was consumed by restore %s: its files are the datadir %s now", dir, setting.Move, datadir)
	}
	return setting.Errorf("the files of backup %s were moved into %s by an interrupted restore %s: finish it with the same command and %s", dir, to, setting.Move, setting.Resume)
}

// consumedPrefix starts the marker of a backup a --move restore consumed.
const consumedPrefix = "consumed by a restore into "

// Finished implements Consuming: a moved backup's marker now says where its files
// went for good, and the journal goes.
func (s *DirSource) Finished(staging, datadir string) error {
	if !s.Move {
		return nil
	}
	p := filepath.Join(s.Dir, movedMarker)
	if err := xtrabackup.WriteFileSync(p, []byte(consumedPrefix+datadir+"\n")); err != nil {
		return err
	}
	return os.Remove(staging + journalExt)
}

// Phase implements Consuming: it records the phase in the journal.
func (s *DirSource) Phase(staging, phase string) error {
	if !s.Move {
		return nil
	}
	f, err := os.OpenFile(staging+journalExt, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return setting.Errorf("restore %s journal: %w", setting.Move, err)
	}
	defer f.Close()
	if _, err := f.WriteString(phase + "\n"); err != nil {
		return setting.Errorf("restore %s journal: %w", setting.Move, filecopy.WrapWriteErr(err))
	}
	return f.Sync()
}

// Settle implements Consuming. A copy restore removes its staging directory (the
// backup is untouched). A move puts back what it moved, unless recovery had begun:
// then staging is kept for --resume.
func (s *DirSource) Settle(staging string, err error) error {
	if !s.Move {
		if rerr := os.RemoveAll(staging); rerr != nil {
			return fmt.Errorf("%w; the staging directory %s could not be removed (%v): remove it", err, staging, rerr)
		}
		return fmt.Errorf("%w; the partial copy was removed, and the backup and the datadir are as they were: run the restore again", err)
	}
	st, jerr := readMoveJournal(staging)
	switch {
	case jerr != nil: // never move back what cannot be told apart
		return setting.Errorf("%w; the backup's files moved so far are in %s (its journal is unreadable: %v): move them back into %s by hand", err, staging, jerr, s.Dir)
	case st.swapping:
		return fmt.Errorf("%w; the restored files are split between %s and the datadir (nothing is lost): move the entries left in %s into the datadir", err, staging, staging)
	case st.recovering:
		return setting.Errorf("%w; the backup's files are in %s, where recovery had begun on them (%s no longer holds them): fix the cause and run the same command with %s to finish the restore", err, staging, s.Dir, setting.Resume)
	}
	if merr := s.moveBack(staging); merr != nil {
		return setting.Errorf("%w; putting the backup's files back from %s failed (%v): they are safe there; run the same command with %s to finish the restore", err, staging, merr, setting.Resume)
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
	if err := os.Remove(staging); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.Dir, movedMarker)); err != nil {
		return err
	}
	return os.Remove(staging + journalExt)
}

// writeSynced writes path with text and makes it durable (file and directory).
func writeSynced(path, text string) error {
	if err := xtrabackup.WriteFileSync(path, []byte(text)); err != nil {
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
