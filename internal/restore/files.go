package restore

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// applyDDLMarkers refuses mariadb-backup's DDL markers (.new/.ren/.del), which only
// mariadb-backup --prepare knows how to apply.
func applyDDLMarkers(dir string) error {
	var found string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return err
		}
		switch filepath.Ext(p) {
		case ".new", ".ren", ".del":
			found = p
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan %s: %w", dir, err)
	}
	if found != "" {
		return fmt.Errorf("backup holds mariadb-backup DDL marker %s: prepare it with mariadb-backup --prepare first, then restore it with ferry", found)
	}
	return nil
}

// skipFile says which backup files are not part of a datadir. xtrabackup_info stays,
// as with mariadb-backup --copy-back, so the datadir tells what point it holds.
func skipFile(rel string) bool {
	switch rel {
	case manifest.FileName, manifest.IncompleteMarker, "backup-my.cnf", "xtrabackup_checkpoints", "xtrabackup_binlog_info":
		return true
	}
	return strings.HasSuffix(rel, ".qp") || strings.HasSuffix(rel, ".tmp")
}

// scanFiles lists every file of dir for a prepared backup's manifest: files unchanged
// since (same size, older mtime) keep the checksum recorded in old, the rest are read.
func scanFiles(dir string, old []manifest.File, since time.Time) ([]manifest.File, error) {
	known := map[string]manifest.File{}
	for _, f := range old {
		known[f.Path] = f
	}
	var out []manifest.File
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
		_, crc, err := filecopy.FileCRC(p)
		if err != nil {
			return err
		}
		out = append(out, manifest.File{Path: rel, Size: fi.Size(), CRC32C: checksum.Hex(crc), Kind: kindOf(rel), Sparse: filecopy.IsSparse(fi)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checksum prepared backup: %w", err)
	}
	return out, nil
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
