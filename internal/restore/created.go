package restore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ferry-backup/ferry/internal/redo"
)

// placeholderSize is the length of an all-zero placeholder tablespace: 4 pages of the
// largest page size (the least a tablespace has), sparse.
const placeholderSize = 4 << 16

// placeholdCreated readies a partial copy (dir) for recovery: for each tablespace the
// backup's redo creates (FILE_CREATE, then renamed or not, not deleted) whose file the
// copy lacks, it writes an all-zero sparse placeholder at its name, and returns the
// paths it wrote (and the directories it made) for removePlaceholders after the recovery.
//
// Why: recovery defers a tablespace whose page 0 is not on disk yet (a table created
// after the checkpoint and not flushed before the copy: an all-zero file) and builds
// it from the redo at the end, in tablespace-id order, stopping at the first it cannot
// build and dropping the rest. A tablespace the redo creates whose file is missing is
// one it cannot build (seen with MariaDB 10.11.19: "Cannot apply log to [page id:
// space=N, page number=0] of corrupted file"), so with innodb_force_recovery=1 every deferred
// tablespace after it, the table being restored among them, kept its zero page 0
// ("Header page consists of zero bytes"). With a placeholder, recovery builds such a
// tablespace from the redo as it does in a full copy.
//
// A log redo.VerifyLinear does not take is left alone: recovery runs as before.
func placeholdCreated(dir string, opts ServerOptions) ([]string, error) {
	names, err := createdInRedo(dir, opts)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	return placeholders(dir, names)
}

// placeholders writes an all-zero sparse file for each logged name (./db/t.ibd) that
// dir lacks, making its directory if needed, and returns what it made, in order.
func placeholders(dir string, names []string) ([]string, error) {
	var made []string
	for _, name := range names {
		rel, ok := localTablespace(name)
		if !ok {
			continue
		}
		path := filepath.Join(dir, rel)
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			continue // in the copy (or not ours to touch)
		}
		if d := filepath.Dir(path); !exists(d) {
			if err := os.Mkdir(d, 0o750); err != nil {
				return made, fmt.Errorf("prepare: placeholder directory for %s: %w", rel, err)
			}
			made = append(made, d)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o640)
		if err != nil {
			return made, fmt.Errorf("prepare: placeholder for %s: %w", rel, err)
		}
		made = append(made, path)
		err = f.Truncate(placeholderSize)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return made, fmt.Errorf("prepare: placeholder for %s: %w", rel, err)
		}
	}
	return made, nil
}

// removePlaceholders removes what placeholdCreated made, files before their directories.
func removePlaceholders(made []string) error {
	var errs []error
	for _, p := range slices.Backward(made) {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prepare: remove placeholder tablespaces: %w", err)
	}
	return nil
}

// createdInRedo returns the names, as logged (after localizeRedo), of the tablespaces
// dir's ib_logfile0 creates from its checkpoint on and does not delete, under their
// last names: recovery initializes every page of those from the redo. A log that is
// not a ferry backup's linear log gives none.
func createdInRedo(dir string, opts ServerOptions) ([]string, error) {
	keys, alg, err := opts.LogKeys()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "ib_logfile0")
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil, err
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("prepare: map %s: %w", path, err)
	}
	defer unix.Munmap(b)
	ll, err := redo.VerifyLinear(b, keys, alg)
	if err != nil {
		return nil, nil
	}
	return createdNames(ll.FileOps, ll.Checkpoint.LSN), nil
}

// createdNames folds a log's file records into the names of the tablespaces created
// at or after the checkpoint LSN cp and not deleted, under their last names, sorted.
func createdNames(ops []redo.FileOp, cp uint64) []string {
	created := map[uint32]string{}
	for _, op := range ops {
		if op.LSN < cp {
			continue // before the checkpoint: recovery does not read it
		}
		switch op.Kind {
		case redo.FileCreate:
			created[op.SpaceID] = op.Name
		case redo.FileRename:
			if _, ok := created[op.SpaceID]; ok {
				created[op.SpaceID] = op.NewName
			}
		case redo.FileDelete:
			delete(created, op.SpaceID)
		}
	}
	var names []string
	for _, n := range created {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// localTablespace turns a logged name "./db/t.ibd" into db/t.ibd; other names (absolute,
// undo or system files, anything with a .. or a deeper path) are not placeholders'.
func localTablespace(name string) (string, bool) {
	rel, ok := strings.CutPrefix(name, "./")
	if !ok || !strings.HasSuffix(rel, ".ibd") {
		return "", false
	}
	parts := strings.Split(rel, "/")
	if len(parts) != 2 || slices.ContainsFunc(parts, func(p string) bool { return p == "" || p == "." || p == ".." }) {
		return "", false
	}
	return rel, true
}

// exists tells whether path names something (without following a last link).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// countSuffix counts the paths ending in suffix.
func countSuffix(paths []string, suffix string) int {
	n := 0
	for _, p := range paths {
		if strings.HasSuffix(p, suffix) {
			n++
		}
	}
	return n
}

// checkRebuilt refuses a recovered partial copy (dir) in which a tablespace the restore
// wants (want, on paths relative to dir) still has an all-zero first page: recovery did
// not build it from the redo, and the export would fail with a less helpful message.
func checkRebuilt(dir string, want func(path string) bool) error {
	ibds, err := filepath.Glob(filepath.Join(dir, "*", "*.ibd"))
	if err != nil {
		return err
	}
	head := make([]byte, 4096)
	for _, p := range ibds {
		rel := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		if !want(rel) {
			continue
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		n, err := io.ReadFull(f, head)
		f.Close()
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("prepare: read %s: %w", rel, err)
		}
		if !slices.ContainsFunc(head[:n], func(b byte) bool { return b != 0 }) {
			return fmt.Errorf("recovery did not rebuild %s from the redo (its first page is still all zeros: the table was not flushed before the backup); restore the whole backup aside and take the table from it", rel)
		}
	}
	return nil
}
