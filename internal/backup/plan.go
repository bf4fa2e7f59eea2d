// Package backup is ferry's hot backup job: plan the file list, tail the redo log, copy
// InnoDB files with every page validated, walk the BACKUP STAGE sequence, copy the
// non-InnoDB files consistently, and write the mariabackup-compatible metadata and the
// manifest last.
//
// The job reaches the server only through the server seam (server.go: Connector,
// Server, BackupLock, RedoLog; MariaDB is the implementation over internal/mariadb) and
// takes its time from one clock (Config.Clock, internal/clock), so that Run runs in unit
// tests against a fake server (backuptest) and a fake clock.
package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/diskspace"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
)

// class says when and how a file is copied.
type class int

const (
	classInnoDB      class = iota // tablespace: page-validated copy while the server runs
	classDDLStable                // non-InnoDB file copied under BLOCK_DDL
	classCommit                   // system/log/stat tables copied under BLOCK_COMMIT
	classAriaControl              // aria_log_control: copied first
	classAriaLog                  // aria_log.N: bulk under BLOCK_DDL, tail under BLOCK_COMMIT
)

// srcFile is a file of the server to copy.
type srcFile struct {
	Abs    string // path on the server host
	Rel    string // path inside the backup, '/' separated
	Size   int64
	Class  class
	System bool   // part of the system tablespace (ibdata*)
	Base   uint32 // first page number of this file in its tablespace (ibdata2...)
	Remote bool   // a DATA DIRECTORY tablespace: Abs is outside the datadir
}

// plan is the list of files to copy, by class.
type plan struct {
	InnoDB      []srcFile
	DDLStable   []srcFile
	Commit      []srcFile
	AriaControl []srcFile
	AriaLogs    []srcFile
}

// skipDirs are datadir subdirectories that are not databases.
var skipDirs = map[string]bool{"#innodb_temp": true, "lost+found": true, "#rocksdb": true}

// innodbExt are the InnoDB per-table file extensions.
const innodbExt = ".ibd"

// commitDataExts are the data files of non-transactional and log tables; in the mysql
// schema (system, statistics and log tables) they change until BLOCK_COMMIT.
var commitDataExts = map[string]bool{".MAD": true, ".MAI": true, ".MYD": true, ".MYI": true, ".CSV": true, ".CSM": true}

var ariaLogRe = regexp.MustCompile(`^aria_log\.\d{8}$`)

// scan lists the files of the server the backup copies (all, or a partial backup's).
func (j *job) scan() (plan, error) {
	p, err := scanServer(j.info, j.layout())
	return leaveOut(j.cfg.Filter.apply(p), j.cfg.LeaveOut), err
}

// leaveOut drops the files at the paths rels from p (the LeaveOut test hook).
func leaveOut(p plan, rels []string) plan {
	if len(rels) == 0 {
		return p
	}
	drop := func(in []srcFile) []srcFile {
		var out []srcFile
		for _, s := range in {
			if !slices.Contains(rels, s.Rel) {
				out = append(out, s)
			}
		}
		return out
	}
	p.InnoDB, p.DDLStable, p.Commit = drop(p.InnoDB), drop(p.DDLStable), drop(p.Commit)
	return p
}

// scanServer lists the files of a running server laid out as l says.
func scanServer(info mariadb.Info, l Layout) (plan, error) {
	var p plan
	sys, err := l.system(info)
	if err != nil {
		return p, err
	}
	p.InnoDB = append(p.InnoDB, sys...)
	dbs, err := scanDatabases(info.Datadir, l)
	if err != nil {
		return p, err
	}
	for _, f := range dbs {
		switch f.Class {
		case classInnoDB:
			p.InnoDB = append(p.InnoDB, f)
		case classCommit:
			p.Commit = append(p.Commit, f)
		default:
			p.DDLStable = append(p.DDLStable, f)
		}
	}
	p.AriaControl, p.AriaLogs, err = ariaFiles(info)
	return p, err
}

// systemFiles returns ibdata* and undo* tablespaces.
func systemFiles(info mariadb.Info) ([]srcFile, error) {
	out, err := dataFiles(info)
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(info.Vars["innodb_undo_tablespaces"])
	udir := dirOr(info.Vars["innodb_undo_directory"], info.Datadir)
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("undo%03d", i)
		f, err := statFile(filepath.Join(udir, name), name, classInnoDB)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// dataFiles returns the system tablespace's files (innodb_data_file_path).
func dataFiles(info mariadb.Info) ([]srcFile, error) {
	home := dirOr(info.Vars["innodb_data_home_dir"], info.Datadir)
	var out []srcFile
	var base uint32
	for _, spec := range strings.Split(info.Vars["innodb_data_file_path"], ";") {
		name, rest, _ := strings.Cut(spec, ":")
		if name == "" {
			continue
		}
		if strings.Contains(rest, "raw") || strings.Contains(rest, "newraw") {
			return nil, fmt.Errorf("raw device system tablespace %s is not supported", name)
		}
		f, err := statFile(filepath.Join(home, name), filepath.Base(name), classInnoDB)
		if err != nil {
			return nil, err
		}
		f.System, f.Base = true, base
		base += uint32(f.Size / int64(info.PageSize))
		out = append(out, f)
	}
	return out, nil
}

// dirOr resolves a server directory variable ("" or "./" mean the datadir).
func dirOr(v, datadir string) string {
	v = strings.TrimRight(v, "/")
	switch {
	case v == "" || v == ".":
		return datadir
	case filepath.IsAbs(v):
		return v
	default:
		return filepath.Join(datadir, v)
	}
}

func statFile(abs, rel string, c class) (srcFile, error) {
	fi, err := os.Stat(abs)
	if err != nil {
		return srcFile{}, fmt.Errorf("server file %s: %w", abs, err)
	}
	return srcFile{Abs: abs, Rel: rel, Size: fi.Size(), Class: c}, nil
}

// scanDatabases lists the files of every database directory.
func scanDatabases(datadir string, l Layout) ([]srcFile, error) {
	ents, err := os.ReadDir(datadir)
	if err != nil {
		return nil, fmt.Errorf("read datadir %s: %w (ferry must run on the database host as root or the mysql user)", datadir, err)
	}
	var out []srcFile
	for _, e := range ents {
		if !e.IsDir() || l.skipDir(e.Name()) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		files, err := scanDatabase(datadir, e.Name(), l)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

func scanDatabase(datadir, db string, l Layout) ([]srcFile, error) {
	ents, err := os.ReadDir(filepath.Join(datadir, db))
	if err != nil {
		return nil, fmt.Errorf("read database directory %s: %w", db, err)
	}
	var out []srcFile
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, "#sql") {
			continue
		}
		c := l.classify(db, name)
		fi, err := e.Info()
		if err != nil {
			continue // dropped while listing
		}
		out = append(out, srcFile{Abs: filepath.Join(datadir, db, name), Rel: db + "/" + name, Size: fi.Size(), Class: c})
		if filepath.Ext(name) == islExt {
			if f, ok := remoteTablespace(datadir, db, name); ok {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// islExt is the link file of a DATA DIRECTORY table: it holds the absolute path of the
// tablespace, which lives outside the datadir.
const islExt = ".isl"

// maxISL bounds a link file: it holds one path.
const maxISL = 4096

// remoteTablespace returns the tablespace a .isl file points at, stored in the backup
// beside the link as db/<table>.ibd, as mariadb-backup stores it. A link being
// dropped or unreadable while listing is skipped, like a dropped table.
func remoteTablespace(datadir, db, isl string) (srcFile, bool) {
	f, err := os.Open(filepath.Join(datadir, db, isl))
	if err != nil {
		return srcFile{}, false
	}
	defer f.Close()
	b := make([]byte, maxISL)
	n, _ := io.ReadFull(f, b)
	path := strings.TrimRight(string(b[:n]), "\r\n")
	if !filepath.IsAbs(path) || filepath.Ext(path) != innodbExt {
		return srcFile{}, false
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return srcFile{}, false
	}
	rel := db + "/" + strings.TrimSuffix(isl, islExt) + innodbExt
	return srcFile{Abs: path, Rel: rel, Size: fi.Size(), Class: classInnoDB, Remote: true}, true
}

func classifyTableFile(db, name string) class {
	ext := filepath.Ext(name)
	switch {
	case ext == innodbExt:
		return classInnoDB
	case db == "mysql" && commitDataExts[strings.ToUpper(ext)]:
		return classCommit
	default:
		return classDDLStable
	}
}

// ariaFiles returns aria_log_control and the aria_log.N files, oldest first.
func ariaFiles(info mariadb.Info) (control, logs []srcFile, err error) {
	dir := dirOr(info.Vars["aria_log_dir_path"], info.Datadir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read Aria log directory %s: %w", dir, err)
	}
	for _, e := range ents {
		fi, ierr := e.Info()
		if ierr != nil {
			continue
		}
		f := srcFile{Abs: filepath.Join(dir, e.Name()), Rel: e.Name(), Size: fi.Size()}
		switch {
		case e.Name() == "aria_log_control":
			f.Class = classAriaControl
			control = append(control, f)
		case ariaLogRe.MatchString(e.Name()):
			f.Class = classAriaLog
			logs = append(logs, f)
		}
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].Rel < logs[j].Rel })
	return control, logs, nil
}

// checkRoom refuses, before the first byte is written, a full backup into a directory
// whose filesystem has less room than the backup needs: the allocated size of every file
// the plan copies (a sparse file stays sparse in the copy) and the redo the server wrote
// since its last checkpoint (where the backup's redo copy starts). Redo written during
// the copy is not known up front and not counted. An incremental's need is its changed
// pages, not known before they are read: it is not checked here, nor are streams and
// repositories, nor a clone donor's copy (their room is elsewhere).
func (j *job) checkRoom(ctx context.Context) error {
	if c := j.sink.Caps(); !j.mode.roomKnown() || c.Remote || c.Storage.Format != manifest.StorageDir {
		return nil
	}
	p, err := j.scan()
	if err != nil {
		return err
	}
	files := allocated(p)
	var redo int64
	if cp, err := j.checkpoint(); err == nil {
		if _, cur, err := j.srv.LSNs(ctx); err == nil && cur > cp {
			redo = int64(cur - cp)
		}
	}
	what := fmt.Sprintf("the backup (the server's files, %s allocated, and the redo since its last checkpoint, %s)", diskspace.Human(files), diskspace.Human(redo))
	return diskspace.Check(j.sink.Name(), files+redo, what)
}

// allocated is the disk space the plan's files take on the server: their allocated
// blocks, or their size where the filesystem reports none.
func allocated(p plan) int64 {
	var n int64
	for _, list := range [][]srcFile{p.InnoDB, p.DDLStable, p.Commit, p.AriaControl, p.AriaLogs} {
		for _, f := range list {
			n += diskspace.Allocated(f.Abs, f.Size)
		}
	}
	return n
}
