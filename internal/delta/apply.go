package delta

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Stats counts what ApplyDir did to the tablespace files of the target.
type Stats struct {
	Deltas  int // .delta files applied
	Pages   int // pages written
	Created int // tablespace files created (new or re-created tables, .new markers)
	Renamed int // tablespace files renamed (.ren markers, space ids found under another name)
	Removed int // tablespace files removed (.del markers, dropped tables, stale files)
	Skipped int // pages not written because a later incremental holds them (Skip)
}

// Skip tells ApplyDirSkip which pages not to write: those a later incremental of the
// chain holds too, which will overwrite them before anything reads them.
type Skip func(PageKey) bool

// applier holds one ApplyDir run.
type applier struct {
	target, inc string
	log         *slog.Logger
	skip        Skip // nil: write every page
	noSync      bool // Options.NoSync
	otherLater  bool // Options.OthersFromNext
	stats       Stats
	dirs        map[string]bool // directories whose entries changed, synced at the end
}

// incFiles is what an incremental directory holds, by relative '/'-separated name.
type incFiles struct {
	dels, rens, news []string
	deltas           []string // names without ".delta"
	metas            map[string]bool
	other            []string // files copied as they are
	dirs             map[string]bool
}

// ApplyDir applies the incremental backup directory inc onto the backup directory
// target in place, as `mariadb-backup --prepare --incremental-dir` does before crash
// recovery (which the caller runs afterwards):
//
//  1. Every X.delta (with its X.meta) is applied to the target file holding the meta's
//     space id: X itself, another .ibd file renamed to X (a table renamed since the
//     base), or a new file X (a table created or truncated since the base).
//  2. Page 0 in a delta extends the file to the FSP_SIZE it records (never shrinks). A
//     delta whose .meta says ferry_whole = 1 holds every page of a file that replaced
//     the base's: the target file is emptied first.
//  3. DDL markers: <t>.del removes <t>.ibd, <old>.ren renames <old>.ibd to the name it
//     holds, <t>.new replaces <t>.ibd. They come after the deltas (mariadb-backup
//     applies them first): an incremental stream cancels with <t>.del a delta it sent
//     for a tablespace DDL changed during the copy, and sends the tablespace whole as
//     <t>.new (docs/incremental.md).
//  4. .ibd files no delta or .new names are removed (tables dropped since the base).
//  5. Every other file of target (not a tablespace) is removed and the other files of
//     inc are copied in; empty directories inc does not have are removed.
//
// inc is only read. Files and directories of target whose names start with "." are
// left alone, as are those of inc. Changed files are synced before ApplyDir returns.
// A nil log discards the log.
func ApplyDir(target, inc string, log *slog.Logger) (Stats, error) {
	return ApplyDirWith(target, inc, log, Options{})
}

// Options change what ApplyDirWith does.
type Options struct {
	Skip Skip // pages not written (nil: none)
	// NoSync leaves the changed files' data to the caller to make durable (a restore
	// syncs its whole staging directory before it records a link applied or swaps the
	// copy in): a chain's later links and its redo apply write many of the same pages
	// again, and each sync would write them to the disk once more. Each file's
	// writeback is started once its pages are written, so that the caller's sync
	// waits for less.
	NoSync bool
	// OthersFromNext leaves the files that are not tablespaces (step 5: the redo log,
	// .frm files, ...) as they are, neither removed nor copied in: the caller applies
	// another incremental next, before anything reads them, and that one replaces
	// them all. A chain's redo logs are hundreds of MB each, and only the newest's is
	// read.
	OthersFromNext bool
}

// ApplyDirWith is ApplyDir with options.
func ApplyDirWith(target, inc string, log *slog.Logger, o Options) (Stats, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &applier{target: target, inc: inc, log: log, dirs: map[string]bool{}, skip: o.Skip, noSync: o.NoSync, otherLater: o.OthersFromNext}
	if err := a.checkDirs(); err != nil {
		return Stats{}, err
	}
	files, err := scanInc(inc)
	if err != nil {
		return Stats{}, err
	}
	if err := a.run(files); err != nil {
		return a.stats, err
	}
	log.Info("incremental backup applied", "incremental", inc, "target", target, "deltas", a.stats.Deltas,
		"pages", a.stats.Pages, "pages_skipped", a.stats.Skipped, "created", a.stats.Created, "renamed", a.stats.Renamed, "removed", a.stats.Removed)
	return a.stats, nil
}

func (a *applier) run(files *incFiles) error {
	if len(files.deltas) == 0 {
		return fmt.Errorf("apply incremental %s: no .delta file in it: not an incremental backup directory", a.inc)
	}
	jobs, err := a.loadJobs(files)
	if err != nil {
		return err
	}
	if err := a.resolve(jobs); err != nil {
		return err
	}
	if err := a.applyDeltas(jobs); err != nil {
		return err
	}
	// Markers after the deltas: a stream cannot take back a delta it sent, so a
	// tablespace dropped, renamed or re-created during ferry's incremental keeps its
	// delta, cancelled by a .del marker, and comes whole as a .new (DDL markers,
	// docs/incremental.md).
	if err := a.applyMarkers(files); err != nil {
		return err
	}
	if err := a.removeDropped(jobs, files.news); err != nil {
		return err
	}
	if !a.otherLater {
		if err := a.replaceOtherFiles(files); err != nil {
			return err
		}
	}
	return a.syncDirs()
}

// checkDirs refuses an incremental directory that the changes to target would reach:
// inc may sit inside target only below a directory whose name starts with ".".
func (a *applier) checkDirs() error {
	for _, d := range []string{a.target, a.inc} {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("apply incremental: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("apply incremental: %s is not a directory", d)
		}
	}
	t, err1 := filepath.Abs(a.target)
	i, err2 := filepath.Abs(a.inc)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("apply incremental: %w", err)
	}
	if nested(t, i) || nested(i, t) {
		return fmt.Errorf("apply incremental: %s and %s overlap: keep the incremental directory apart from the target (or under a directory of it whose name starts with \".\")", a.inc, a.target)
	}
	return nil
}

// nested says whether inner is outer or lies below it other than under a directory
// whose name starts with "." (which ApplyDir never enters).
func nested(outer, inner string) bool {
	rel, err := filepath.Rel(outer, inner)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	return rel == "." || !strings.HasPrefix(rel, ".")
}

// walk calls fn for every regular file and directory below root (root excluded), by
// relative '/'-separated name, skipping names that start with "." and refusing
// anything but regular files and directories.
func walk(root string, fn func(rel string, d fs.DirEntry) error) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file or directory (a backup never holds one)", p)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), d)
	})
	if err != nil {
		return fmt.Errorf("scan %s: %w", root, err)
	}
	return nil
}

func scanInc(inc string) (*incFiles, error) {
	f := &incFiles{metas: map[string]bool{}, dirs: map[string]bool{}}
	err := walk(inc, func(rel string, d fs.DirEntry) error {
		if d.IsDir() {
			f.dirs[rel] = true
			return nil
		}
		switch filepath.Ext(rel) {
		case ".del":
			f.dels = append(f.dels, rel)
		case ".ren":
			f.rens = append(f.rens, rel)
		case ".new":
			f.news = append(f.news, rel)
		case ".delta":
			f.deltas = append(f.deltas, strings.TrimSuffix(rel, ".delta"))
		case ".meta":
			f.metas[strings.TrimSuffix(rel, ".meta")] = true
		default:
			f.other = append(f.other, rel)
		}
		return nil
	})
	return f, err
}

// Other tells whether the file rel of an incremental directory is one that applying
// it copies into the target as it is (step 5 of ApplyDir: the redo log, .frm files,
// ...), rather than a delta, its .meta or a DDL marker.
func Other(rel string) bool {
	switch filepath.Ext(rel) {
	case ".del", ".ren", ".new", ".delta", ".meta":
		return false
	}
	return true
}

// ibdName returns the tablespace a marker (<t>.del, <t>.ren, <t>.new) is about.
func ibdName(marker string) string {
	return strings.TrimSuffix(marker, filepath.Ext(marker)) + ".ibd"
}

// isSystem says whether rel is a system or undo tablespace (never renamed or removed):
// ibdata*, MariaDB's undoNNN, MySQL's undo_NNN.
func isSystem(rel string) bool {
	if strings.Contains(rel, "/") {
		return false
	}
	if strings.HasPrefix(rel, "ibdata") {
		return true
	}
	n, ok := strings.CutPrefix(rel, "undo")
	n = strings.TrimPrefix(n, "_")
	return ok && n != "" && n[0] >= '0' && n[0] <= '9'
}

// isTablespace says whether rel names an InnoDB tablespace file (MySQL's undo
// tablespaces made by CREATE UNDO TABLESPACE are *.ibu).
func isTablespace(rel string) bool {
	return strings.HasSuffix(rel, ".ibd") || strings.HasSuffix(rel, ".ibu") || isSystem(rel)
}

// touched records that the directory holding path changed.
func (a *applier) touched(path string) { a.dirs[filepath.Dir(path)] = true }

func (a *applier) syncDirs() error {
	for d := range a.dirs {
		if err := syncPath(d); err != nil {
			return err
		}
	}
	return nil
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return nil
}
