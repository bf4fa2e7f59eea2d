package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/safepath"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/workers"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// datadirFiles lists the files that go into the datadir: the manifest's for ferry
// backups (with the checksums to verify), a directory walk for mariadb-backup ones.
func (b *Backup) datadirFiles() ([]manifest.File, error) {
	if b.Manifest != nil && !b.ForeignPrepared {
		var out []manifest.File
		for _, f := range b.Manifest.Files {
			if f.Stored != "" {
				return nil, setting.Errorf("%s holds the compressed or encrypted files of a ferry stream (%s): restore from the stream itself with %s", b.Dir, f.Stored, setting.StreamFile)
			}
			if !skipFile(f.Path) {
				out = append(out, f)
			}
		}
		return out, nil
	}
	var out []manifest.File
	if err := safepath.CheckTree(b.Dir); err != nil {
		return nil, fmt.Errorf("backup %s: %w", b.Dir, err)
	}
	err := filepath.WalkDir(b.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(b.Dir, p)
		rel = filepath.ToSlash(rel)
		if skipFile(rel) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, manifest.File{Path: rel, Size: fi.Size(), Sparse: filecopy.IsSparse(fi)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list backup %s: %w", b.Dir, err)
	}
	return out, nil
}

func totalSize(files []manifest.File) int64 {
	var n int64
	for _, f := range files {
		n += f.Size
	}
	return n
}

// copyFiles copies (or moves) files from src to dst, largest first, parallel at a
// time and the small files beside them workers.SmallFileWorkers at a time, verifying
// each recorded checksum. A copy leaves unwritten the pages leave names (nil: none).
func copyFiles(ctx context.Context, src, dst string, files []manifest.File, parallel int, move bool, leave filecopy.Leave, prog *progress.Reporter) error {
	var done atomic.Int64
	files = slices.Clone(files) // sorted by size
	plan := workers.Plan{Small: workers.SmallFile, Large: parallel, SmallWorkers: max(workers.SmallFileWorkers, parallel)}
	srcs, dsts := safepath.NewTree(src), safepath.NewTree(dst)
	return workers.BySize(ctx, files, func(f manifest.File) int64 { return f.Size }, plan, func(ctx context.Context, f manifest.File) error {
		from, err := srcs.Join(f.Path)
		if err != nil {
			return fmt.Errorf("backup %s: %w", src, err)
		}
		to, err := dsts.MkdirParents(f.Path, 0o750)
		if err != nil {
			return err
		}
		if move {
			err = moveVerified(from, to, f, prog)
		} else {
			err = copyVerified(ctx, from, to, f, leave, prog)
		}
		if err == nil {
			faultpoint.At(ctx, "restore-file", int(done.Add(1)))
		}
		return err
	})
}

func copyVerified(ctx context.Context, from, to string, f manifest.File, leave filecopy.Leave, prog *progress.Reporter) error {
	if !strings.HasSuffix(f.Path, ".ibd") {
		leave = nil // pages are left only in file-per-table tablespaces
	}
	n, crc, err := filecopy.CopyLeaving(ctx, from, to, prog.Add, leave)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup file %s is missing: the backup is damaged", f.Path)
	}
	if err != nil {
		return err
	}
	return verify(f, n, crc)
}

func moveVerified(from, to string, f manifest.File, prog *progress.Reporter) error {
	if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Lstat(to); err == nil { // moved by the run this one resumes
			prog.Add(f.Size)
			return nil
		}
	}
	if f.CRC32C != "" {
		_, crc, err := filecopy.FileCRC(from)
		if err != nil {
			return fmt.Errorf("backup file %s: %w", f.Path, err)
		}
		fi, err := os.Stat(from)
		if err != nil {
			return err
		}
		if err := verify(f, fi.Size(), crc); err != nil {
			return err
		}
	}
	if err := os.Rename(from, to); err != nil {
		if errors.Is(err, syscall.EXDEV) {
			return setting.Errorf("%s needs the backup and the datadir on the same filesystem; restore without %s", setting.Move, setting.Move)
		}
		return fmt.Errorf("move %s: %w", f.Path, err)
	}
	prog.Add(f.Size)
	return nil
}

// verify compares a copied file with the manifest.
func verify(f manifest.File, size int64, crc uint32) error {
	if f.CRC32C == "" {
		return nil
	}
	if size != f.Size {
		return checksum.Mismatch(fmt.Errorf("backup file %s is %d bytes, the manifest says %d: the backup is truncated or damaged", f.Path, size, f.Size))
	}
	if got := checksum.Hex(crc); got != f.CRC32C {
		return checksum.Mismatch(fmt.Errorf("backup file %s is corrupt: CRC-32C %s, the manifest says %s", f.Path, got, f.CRC32C))
	}
	return nil
}

// coordinates returns the binlog/GTID position the backup holds.
func (b *Backup) coordinates() mariadb.Coordinates {
	if b.Manifest != nil {
		c := b.Manifest.Coordinates
		if b.recoveredGTIDs != "" {
			c.GTIDBinlogPos, c.GTIDCurrentPos = b.recoveredGTIDs, b.recoveredGTIDs
		}
		return c
	}
	c := readBinlogInfo(b.Dir)
	c.Galera = readGaleraInfo(b.Dir)
	return c
}

// readGaleraInfo reads a mariadb-backup backup's xtrabackup_galera_info (--galera-info);
// nil if it has none or it does not parse.
func readGaleraInfo(dir string) *mariadb.WsrepPosition {
	b, err := os.ReadFile(filepath.Join(dir, xtrabackup.GaleraInfoFile))
	if err != nil || len(b) > 4096 {
		return nil
	}
	p, err := mariadb.ParseWsrepPosition(string(b))
	if err != nil || !p.Known() {
		return nil
	}
	return &p
}

// readBinlogInfo reads a mariadb-backup backup's xtrabackup_binlog_info.
func readBinlogInfo(dir string) mariadb.Coordinates {
	b, err := os.ReadFile(filepath.Join(dir, xtrabackup.BinlogInfoFile))
	if err != nil {
		return mariadb.Coordinates{}
	}
	parts := strings.Split(strings.TrimSpace(string(b)), "\t")
	c := mariadb.Coordinates{BinlogFile: parts[0]}
	if len(parts) > 1 {
		fmt.Sscan(parts[1], &c.BinlogPos)
	}
	if len(parts) > 2 {
		c.GTIDBinlogPos = parts[2]
	}
	return c
}
