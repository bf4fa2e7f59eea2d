package mysqlredo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// ArchiveHeaderSize is the size of the zero header that starts a redo log archive
// file; the first archived block follows it.
const ArchiveHeaderSize = 4096

// ArchiveDir is one label:directory entry of innodb_redo_log_archive_dirs.
type ArchiveDir struct{ Label, Dir string }

// ParseArchiveDirs parses innodb_redo_log_archive_dirs ("label:/dir;label2:/dir2",
// a label may be empty). Entries without a directory are left out.
func ParseArchiveDirs(v string) []ArchiveDir {
	var dirs []ArchiveDir
	for _, e := range strings.Split(v, ";") {
		label, dir, ok := strings.Cut(e, ":")
		if dir = strings.TrimSpace(dir); ok && dir != "" {
			dirs = append(dirs, ArchiveDir{Label: strings.TrimSpace(label), Dir: dir})
		}
	}
	return dirs
}

// ArchiveSource is a redo log archive file the server appends to (*Archive), which a
// Tailer follows (Config.Archive).
type ArchiveSource interface {
	// Path is the archive file.
	Path() string
	// Flush makes the server write the block being filled, partial, to the archive.
	Flush(ctx context.Context) error
}

// Archive is a redo log archive the server writes for one copy
// (innodb_redo_log_archive_start, INNODB_REDO_LOG_ARCHIVE privilege). From the block
// being written when it starts, the server appends every redo block to the archive
// file, and recycles no redo file before it is archived: a copy that follows the
// archive cannot be lapped. Checked on 8.0.31: the file is a 4 KiB zero header, then
// raw blocks; archiving ends with the session that started it, and the server then
// deletes the file.
type Archive struct {
	mu   sync.Mutex
	conn *sql.Conn
	sub  string // the subdirectory made for this archive, removed by Stop
	path string
}

// StartArchive makes a fresh subdirectory in d.Dir (mode 0700, owned as d.Dir is, so
// that the server can write there) and starts archiving into it on conn, which it
// owns from then on, also on failure: conn must stay open, and be used for nothing
// else, until Stop. It fails unless this process can read the archive file.
func StartArchive(ctx context.Context, conn *sql.Conn, d ArchiveDir) (_ *Archive, err error) {
	a := &Archive{conn: conn}
	defer func() {
		if err != nil {
			a.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // the start's error says more
		}
	}()
	if a.sub, err = makeArchiveSubdir(d.Dir); err != nil {
		return nil, err
	}
	// An empty sql_mode: the UDFs fail under ANSI_QUOTES on some versions (PXB-3147).
	if _, err = conn.ExecContext(ctx, "SET SESSION sql_mode = ''"); err != nil {
		return nil, fmt.Errorf("start the server's redo log archive: %w", err)
	}
	// Literals: the function sees a placeholder's value as NULL when it is set up.
	q := "DO innodb_redo_log_archive_start(" + mariadb.QuoteString(d.Label) + ", " + mariadb.QuoteString(filepath.Base(a.sub)) + ")"
	if _, err = conn.ExecContext(ctx, q); err != nil {
		return nil, fmt.Errorf("start the server's redo log archive in %s (needs the INNODB_REDO_LOG_ARCHIVE grant): %w", a.sub, err)
	}
	if a.path, err = archiveFile(a.sub); err != nil {
		return nil, err
	}
	return a, nil
}

// makeArchiveSubdir makes a new 0700 directory in dir, owned by dir's owner when this
// process may give it away (root), as the server requires of an archive directory.
func makeArchiveSubdir(dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("redo log archive directory: %w", err)
	}
	sub, err := os.MkdirTemp(dir, "ferry-redo-")
	if err != nil {
		return "", fmt.Errorf("redo log archive directory: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && sys.Uid != 0 {
		if err := os.Chown(sub, int(sys.Uid), int(sys.Gid)); err != nil {
			os.Remove(sub)
			return "", fmt.Errorf("redo log archive directory: %w", err)
		}
	}
	return sub, nil
}

// archiveFile finds the one archive file the server made in sub and checks that it
// can be read.
func archiveFile(sub string) (string, error) {
	names, err := filepath.Glob(filepath.Join(sub, "archive.*.log"))
	if err != nil || len(names) != 1 {
		return "", fmt.Errorf("redo log archive: want one archive.*.log in %s, found %d (%v)", sub, len(names), err)
	}
	f, err := os.Open(names[0])
	if err != nil {
		return "", fmt.Errorf("read the server's redo log archive (run ferry as the server's OS user, in its group, or as root): %w", err)
	}
	f.Close()
	return names[0], nil
}

// Path is the archive file.
func (a *Archive) Path() string { return a.path }

// Flush makes the server write the block being filled to the archive, partial: the
// end of a copy needs it (innodb_redo_log_archive_flush).
func (a *Archive) Flush(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.conn.ExecContext(ctx, "DO innodb_redo_log_archive_flush()"); err != nil {
		return fmt.Errorf("flush the server's redo log archive: %w", err)
	}
	return nil
}

// Stop ends archiving, closes the session and removes the archive and its
// subdirectory. It returns the first failure, having tried every step.
func (a *Archive) Stop(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	if a.conn != nil {
		if a.path != "" {
			if _, err := a.conn.ExecContext(ctx, "DO innodb_redo_log_archive_stop()"); err != nil {
				errs = append(errs, fmt.Errorf("stop the server's redo log archive: %w", err))
			}
		}
		errs = append(errs, a.conn.Close())
		a.conn = nil
	}
	if a.sub != "" {
		errs = append(errs, os.RemoveAll(a.sub))
		a.sub = ""
	}
	return errors.Join(errs...)
}

// openArchive opens the archive file at path once the server has archived its first
// block, which says where the archive starts; before that (or while the first block
// is being written) it returns nil.
func openArchive(path string) (*openFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open the server's redo log archive: %w", err)
	}
	b := make([]byte, BlockSize)
	if _, err := fh.ReadAt(b, ArchiveHeaderSize); err != nil {
		fh.Close()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the server's redo log archive: %w", err)
	}
	num, ok := storedNumber(b)
	if info, err := inspectBlock(b, num*BlockSize); !ok || err != nil || info.kind != blockValid {
		fh.Close()
		return nil, err // not whole yet: the next round reads it again
	}
	f := &openFile{File: File{Path: path, StartLSN: num * BlockSize, EndLSN: num * BlockSize}, fh: fh, base: ArchiveHeaderSize}
	return f, f.refresh()
}

// refresh sets EndLSN of an archive file to the end of the whole blocks it holds.
func (f *openFile) refresh() error {
	st, err := f.fh.Stat()
	if err != nil {
		return fmt.Errorf("the server's redo log archive: %w", err)
	}
	if n := st.Size() - f.base; n > 0 {
		f.EndLSN = f.StartLSN + uint64(n)/BlockSize*BlockSize
	}
	return nil
}
