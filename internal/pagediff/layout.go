package pagediff

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// layout is what backup-my.cnf says about the InnoDB files of a backup.
type layout struct {
	systemFiles []string // innodb_data_file_path's files, in page order
	pageSize    int      // innodb_page_size
}

// isSystem reports whether name is a file of the system tablespace.
func (l layout) isSystem(name string) bool {
	for _, f := range l.systemFiles {
		if f == name {
			return true
		}
	}
	return false
}

// readLayout reads the system data files and the page size from the backup-my.cnf in
// dir, with the server's defaults when it names none.
func readLayout(dir string) (layout, error) {
	cnf, err := xtrabackup.ReadMyCnf(dir)
	if err != nil {
		return layout{}, fmt.Errorf("read the backup's options in %s: %w", dir, err)
	}
	l := layout{pageSize: 16384}
	if v := optfile.Value(cnf["innodb_page_size"]); v != "" {
		n, err := optfile.ParseSize(v)
		if err != nil || n < 4096 || n > maxPageSize {
			return layout{}, fmt.Errorf("%s: innodb_page_size %q is not a page size", dir, v)
		}
		l.pageSize = int(n)
	}
	path := optfile.Value(cnf["innodb_data_file_path"])
	if path == "" {
		path = "ibdata1:12M:autoextend"
	}
	for _, spec := range strings.Split(path, ";") {
		if name, _, _ := strings.Cut(spec, ":"); name != "" {
			l.systemFiles = append(l.systemFiles, filepath.Base(name))
		}
	}
	return l, nil
}

// undoRe names the undo tablespaces (undo001 ...).
var undoRe = regexp.MustCompile(`^undo[0-9]{3}$`)

// tablespaceFiles returns the InnoDB data files under dir, relative to it: the system
// data files and undo tablespaces at the top and every .ibd file at any depth. The log,
// the temporary tablespace, the buffer pool dump and non-InnoDB files are left out
// (Ignores).
func tablespaceFiles(dir string, l layout) (map[string]bool, error) {
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		top := filepath.Dir(rel) == "."
		if strings.HasSuffix(rel, ".ibd") || top && (l.isSystem(rel) || undoRe.MatchString(rel)) {
			out[rel] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the tablespaces in %s: %w", dir, err)
	}
	return out, nil
}
