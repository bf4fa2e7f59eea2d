package backup

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// Layout is how a server family lays out its files: which are tablespaces, which are
// copied under which lock, and what the end point needs beside them. The planner
// (scan) and the end of the copy ask it; MariaDBLayout and mysqlLayout are the two.
type Layout interface {
	// system lists the tablespaces outside the database directories: ibdata*, undo
	// tablespaces, and MySQL's mysql.ibd and general tablespaces.
	system(info mariadb.Info) ([]srcFile, error)
	// classify says how the file name of database directory db is copied.
	classify(db, name string) class
	// skipDir tells a datadir subdirectory that holds no database.
	skipDir(name string) bool
	// endFiles are what the backup copies once the end point c is read, with commits
	// still blocked: parts of files (Size bytes) and whole small files made here.
	endFiles(info mariadb.Info, c mariadb.Coordinates) ([]srcFile, []madeFile, error)
	// flavor is how the family's pages are checked.
	flavor() innodb.Flavor
	// freeAsZeros tells whether pages the extent descriptors call free may be stored as
	// zeros: it rests on how the family's recovery rebuilds a page allocated again after
	// the copy read it.
	freeAsZeros() bool
	// settings are the server variables a recovery of the backup needs (backup-my.cnf).
	settings() []string
}

// madeFile is a small file the backup writes itself.
type madeFile struct {
	Rel  string
	Data []byte
}

// MariaDBLayout is MariaDB's: ibdata* and undoNNN, tablespaces in database
// directories, Aria and MyISAM files copied under the backup stages.
func MariaDBLayout() Layout { return mariadbLayout{} }

type mariadbLayout struct{}

func (mariadbLayout) system(info mariadb.Info) ([]srcFile, error) { return systemFiles(info) }
func (mariadbLayout) classify(db, name string) class              { return classifyTableFile(db, name) }
func (mariadbLayout) skipDir(name string) bool                    { return skipDirs[name] }
func (mariadbLayout) endFiles(mariadb.Info, mariadb.Coordinates) ([]srcFile, []madeFile, error) {
	return nil, nil, nil
}
func (mariadbLayout) flavor() innodb.Flavor { return innodb.FlavorMariaDB }
func (mariadbLayout) freeAsZeros() bool     { return true }
func (mariadbLayout) settings() []string    { return xtrabackup.MyCnfKeys }

// mysqlLayout is MySQL 8.0.30+'s: mysql.ibd and general tablespaces at the top of the
// datadir, undo_NNN and *.ibu undo tablespaces, MyISAM and CSV files copied only under
// FLUSH TABLES WITH READ LOCK, and the current binlog up to the end point.
type mysqlLayout struct{}

// mysqlSkipDirs are the MySQL datadir subdirectories that are not databases.
var mysqlSkipDirs = map[string]bool{"#innodb_temp": true, "#innodb_redo": true, "#clone": true,
	"#meb": true, "#ib_archive": true, "lost+found": true}

// mysqlCommitExts are the files of non-transactional tables.
var mysqlCommitExts = map[string]bool{".MYD": true, ".MYI": true, ".MRG": true, ".CSV": true, ".CSM": true, ".ARZ": true, ".ARM": true}

var undoRe = regexp.MustCompile(`^undo_\d{3,}$`)

func (mysqlLayout) skipDir(name string) bool { return mysqlSkipDirs[name] }

// flavor: MySQL's undo tablespaces have flags MariaDB could write, so the family is
// said, not guessed from them.
func (mysqlLayout) flavor() innodb.Flavor { return innodb.FlavorMySQL }

// freeAsZeros: not established for MySQL's redo (it has no record that frees a page),
// so free pages are copied as they are.
func (mysqlLayout) freeAsZeros() bool { return false }

func (mysqlLayout) settings() []string { return xtrabackup.MySQLMyCnfKeys }

func (mysqlLayout) classify(_, name string) class {
	ext := filepath.Ext(name)
	switch {
	case ext == innodbExt:
		return classInnoDB
	case mysqlCommitExts[strings.ToUpper(ext)]:
		return classCommit
	default:
		return classDDLStable // .sdi: held still by LOCK INSTANCE FOR BACKUP
	}
}

func (mysqlLayout) system(info mariadb.Info) ([]srcFile, error) {
	out, err := dataFiles(info)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, dir := range []string{info.Datadir, dirOr(info.Vars["innodb_undo_directory"], info.Datadir)} {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w (ferry must run on the database host as root or the mysql user)", dir, err)
		}
		for _, e := range ents {
			n := e.Name()
			isUndo := undoRe.MatchString(n) || filepath.Ext(n) == ".ibu"
			top := dir == info.Datadir && filepath.Ext(n) == innodbExt // mysql.ibd, general tablespaces
			if !e.Type().IsRegular() || !(isUndo || top) {
				continue
			}
			f, err := statFile(filepath.Join(dir, n), n, classInnoDB)
			if err != nil {
				continue // dropped while listing
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// endFiles is the current binlog up to the end position, and an index naming it: the
// recovery commits from it the transactions the end point's binlog holds but InnoDB
// had only prepared (commits are not blocked on MySQL when every table is InnoDB).
func (mysqlLayout) endFiles(info mariadb.Info, c mariadb.Coordinates) ([]srcFile, []madeFile, error) {
	base := info.Vars["log_bin_basename"]
	if c.BinlogFile == "" || base == "" {
		return nil, nil, nil
	}
	abs := filepath.Join(filepath.Dir(base), c.BinlogFile)
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("the binlog at the end point: %w", err)
	}
	if fi.Size() < int64(c.BinlogPos) {
		return nil, nil, fmt.Errorf("the binlog %s holds %d bytes, less than the end point's position %d", abs, fi.Size(), c.BinlogPos)
	}
	f := srcFile{Abs: abs, Rel: c.BinlogFile, Size: int64(c.BinlogPos), Class: classCommit}
	index := madeFile{Rel: filepath.Base(base) + ".index", Data: []byte("./" + c.BinlogFile + "\n")}
	return []srcFile{f}, []madeFile{index}, nil
}
