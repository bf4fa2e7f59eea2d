package delta

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// removeDropped removes every .ibd file of target that no delta and no .new marker
// names: its table was dropped since the base.
func (a *applier) removeDropped(jobs []*job, news []string) error {
	named := map[string]bool{}
	for _, j := range jobs {
		named[j.rel] = true
	}
	for _, m := range news {
		named[ibdName(m)] = true
	}
	var drop []string
	err := walk(a.target, func(rel string, d fs.DirEntry) error {
		if !d.IsDir() && strings.HasSuffix(rel, ".ibd") && !named[rel] {
			drop = append(drop, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply incremental: %w", err)
	}
	for _, rel := range drop {
		if err := a.removeTablespace(rel, "not in the incremental backup (dropped)"); err != nil {
			return err
		}
	}
	return nil
}

// replaceOtherFiles removes every file of target that is not a tablespace, copies in
// the files of inc that are neither deltas nor markers, then removes the empty
// directories inc does not have.
func (a *applier) replaceOtherFiles(f *incFiles) error {
	var files, dirs []string
	err := walk(a.target, func(rel string, d fs.DirEntry) error {
		switch {
		case d.IsDir():
			dirs = append(dirs, rel)
		case !isTablespace(rel):
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply incremental: %w", err)
	}
	for _, rel := range files {
		p := filepath.Join(a.target, rel)
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("apply incremental: remove %s: %w", p, err)
		}
		a.touched(p)
		a.log.Debug("file removed", "file", rel)
	}
	for _, rel := range f.other {
		if err := a.copyFile(rel, rel); err != nil {
			return err
		}
	}
	return a.removeEmptyDirs(dirs, f.dirs)
}

// removeEmptyDirs removes the directories of target (deepest first) that are empty
// and that inc does not have: databases dropped since the base.
func (a *applier) removeEmptyDirs(dirs []string, keep map[string]bool) error {
	slices.SortFunc(dirs, func(x, y string) int { return strings.Count(y, "/") - strings.Count(x, "/") })
	for _, rel := range dirs {
		if keep[rel] {
			continue
		}
		p := filepath.Join(a.target, rel)
		ents, err := os.ReadDir(p)
		if err != nil {
			return fmt.Errorf("apply incremental: %w", err)
		}
		if len(ents) > 0 {
			continue
		}
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("apply incremental: remove directory %s: %w", p, err)
		}
		a.touched(p)
		delete(a.dirs, p)
		a.log.Debug("directory removed", "dir", rel)
	}
	return nil
}
