package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/xbstream"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
	"golang.org/x/sync/errgroup"
)

// applyDDLMarkers applies the DDL markers of mariadb-backup's layout (also in ferry's
// streams) as mariadb-backup --prepare does, in its order: every <base>.del removes
// <base>.ibd, every <old>.ren renames <old>.ibd to the name it holds, every <base>.new
// replaces <base>.ibd. The markers are consumed.
func applyDDLMarkers(dir string) error {
	marks := map[string][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), scratchPrefix) {
			return filepath.SkipDir // an incremental not applied yet (ChainSource)
		}
		if err != nil || d.IsDir() {
			return err
		}
		switch ext := filepath.Ext(p); ext {
		case ".del", ".ren", ".new":
			marks[ext] = append(marks[ext], p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan %s: %w", dir, err)
	}
	for _, p := range marks[".del"] {
		if err := removeIfExists(ibdOf(p)); err != nil {
			return err
		}
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("apply %s: %w", p, err)
		}
	}
	if err := applyRenames(dir, marks[".ren"]); err != nil {
		return err
	}
	for _, p := range marks[".new"] {
		if err := os.Rename(p, ibdOf(p)); err != nil {
			return fmt.Errorf("apply DDL marker %s: %w", p, err)
		}
	}
	return nil
}

func ibdOf(marker string) string { return strings.TrimSuffix(marker, filepath.Ext(marker)) + ".ibd" }

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("apply DDL marker: remove %s: %w", p, err)
	}
	return nil
}

// applyRenames renames each <old>.ibd to the path held in <old>.ren ("db/new", with or
// without "./" and ".ibd"), through temporary names so that swaps work, refusing paths
// that leave dir.
func applyRenames(dir string, markers []string) error {
	dsts := make([]string, len(markers))
	for i, m := range markers {
		dst, err := renameTarget(dir, m)
		if err != nil {
			return err
		}
		dsts[i] = dst
		if err := os.Rename(ibdOf(m), ibdOf(m)+".ferry-ren"); err != nil {
			return fmt.Errorf("apply DDL marker %s: %w", m, err)
		}
	}
	for i, m := range markers {
		if err := os.Rename(ibdOf(m)+".ferry-ren", dsts[i]); err != nil {
			return fmt.Errorf("apply DDL marker %s: %w", m, err)
		}
		if err := os.Remove(m); err != nil {
			return fmt.Errorf("apply DDL marker %s: %w", m, err)
		}
	}
	return nil
}

func renameTarget(dir, marker string) (string, error) {
	b, err := os.ReadFile(marker)
	if err != nil {
		return "", fmt.Errorf("apply DDL marker: %w", err)
	}
	name := strings.TrimPrefix(strings.TrimSpace(string(b)), "./")
	if !strings.HasSuffix(name, ".ibd") {
		name += ".ibd"
	}
	dst, err := xbstream.SafePath(dir, name)
	if err != nil || name == ".ibd" {
		return "", fmt.Errorf("DDL marker %s names %q: not a table in the backup", marker, name)
	}
	return dst, nil
}

// skipFile says which backup files are not part of a datadir. xtrabackup_info stays,
// as with mariadb-backup --copy-back, so the datadir tells what point it holds.
func skipFile(rel string) bool {
	switch rel {
	case manifest.FileName, manifest.IncompleteMarker, "backup-my.cnf", "xtrabackup_checkpoints", "xtrabackup_binlog_info", movedMarker,
		xtrabackup.SlaveInfoFile, xtrabackup.GaleraInfoFile: // read where they are, never needed in a datadir
		return true
	}
	return strings.HasSuffix(rel, ".qp") || strings.HasSuffix(rel, ".tmp")
}

// scanFiles lists every file of dir for a prepared backup's manifest: files unchanged
// since (same size, older mtime) keep the checksum recorded in old, the rest are read,
// several at once (after an apply they are mostly in the page cache, and reading one
// at a time leaves a core idle).
func scanFiles(dir string, old []manifest.File, since time.Time) ([]manifest.File, error) {
	known := map[string]manifest.File{}
	for _, f := range old {
		known[f.Path] = f
	}
	var out []manifest.File
	var read []int // indexes in out of the files to read
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == manifest.FileName || rel == manifest.FileName+".tmp" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if k, ok := known[rel]; ok && k.Size == fi.Size() && fi.ModTime().Before(since) {
			out = append(out, k)
			return nil
		}
		read = append(read, len(out))
		out = append(out, manifest.File{Path: rel, Size: fi.Size(), Kind: kindOf(rel), Sparse: filecopy.IsSparse(fi)})
		return nil
	})
	if err == nil {
		err = checksumFiles(dir, out, read)
	}
	if err != nil {
		return nil, fmt.Errorf("checksum prepared backup: %w", err)
	}
	return out, nil
}

// checksumFiles sets the CRC-32C of the files of out at indexes read, in parallel.
func checksumFiles(dir string, out []manifest.File, read []int) error {
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU())
	for _, i := range read {
		g.Go(func() error {
			_, crc, err := filecopy.FileCRC(filepath.Join(dir, filepath.FromSlash(out[i].Path)))
			out[i].CRC32C = checksum.Hex(crc)
			return err
		})
	}
	return g.Wait()
}

func kindOf(rel string) string {
	switch {
	case rel == "ib_logfile0":
		return manifest.KindRedo
	case strings.HasSuffix(rel, ".ibd") || strings.HasPrefix(rel, "ibdata") || strings.HasPrefix(rel, "undo"):
		return manifest.KindInnoDB
	case strings.HasPrefix(rel, "xtrabackup_") || rel == "backup-my.cnf":
		return manifest.KindMeta
	}
	return manifest.KindOther
}
