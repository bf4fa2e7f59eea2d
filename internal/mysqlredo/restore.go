package mysqlredo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Sizes of the redo files WriteRedoDir writes.
const (
	// RedoSlack is the free room after the copied log in the last file, for the
	// restored server to write before it needs a new file.
	RedoSlack = 8 << 20
	// fileAlign rounds every file size: a multiple of every innodb_page_size.
	fileAlign = 1 << 20
	// maxRedoFiles bounds the files of a restore: mysqld's largest capacity
	// (512 GiB) holds 31 files of MaxFileSize next to the one being written.
	maxRedoFiles = 31
)

// layout is how WriteRedoDir sizes files (tests shrink it).
type layout struct {
	maxSize int64 // largest file, a multiple of fileAlign
	slack   int64 // free room at least left in the last file
}

// defaultLayout is what mysqld accepts: files up to MaxFileSize.
func defaultLayout() layout { return layout{maxSize: MaxFileSize, slack: RedoSlack} }

// plannedFile is one file WriteRedoDir writes: blocks copied blocks from start on.
type plannedFile struct {
	start  uint64
	blocks int64
	size   int64
}

// planFiles splits n blocks from LSN first into files of at most lo.maxSize bytes,
// the last one with lo.slack bytes free at least.
func planFiles(first uint64, n int64, lo layout) ([]plannedFile, error) {
	perFull := (lo.maxSize - HeaderSize) / BlockSize
	var files []plannedFile
	for n > 0 && HeaderSize+n*BlockSize+lo.slack > lo.maxSize {
		k := min(perFull, n-1)
		files = append(files, plannedFile{start: first, blocks: k, size: HeaderSize + k*BlockSize})
		first, n = first+uint64(k)*BlockSize, n-k
		if len(files) >= maxRedoFiles {
			return nil, fmt.Errorf("the backup's redo log from LSN %d is too long for mysqld: more than %d files of %d bytes", first, maxRedoFiles, lo.maxSize)
		}
	}
	size := (HeaderSize + n*BlockSize + lo.slack + fileAlign - 1) / fileAlign * fileAlign
	return append(files, plannedFile{start: first, blocks: n, size: min(size, lo.maxSize)}), nil
}

// WriteRedoDir turns the backup log file logfile into the redo of a restored
// datadir; see WriteRedoDirFrom.
func WriteRedoDir(logfile string, endLSN uint64, dir, creator string) error {
	f, err := os.Open(logfile)
	if err != nil {
		return fmt.Errorf("open backup redo log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("backup redo log: %w", err)
	}
	return WriteRedoDirFrom(f, st.Size(), endLSN, dir, creator)
}

// WriteRedoDirFrom verifies a backup log of size bytes (header, checkpoint A, every
// block from A to endLSN E) and writes dir/#innodb_redo/#ib_redo0 (dir is
// innodb_log_group_home_dir, by default the datadir) so that a stock mysqld
// recovers from A to exactly E: a header with start LSN A rounded down to 512,
// creator (e.g. "MySQL 8.0.31") and no flags, both checkpoint blocks at A, the
// copied blocks with the one holding E cut to end there (data_len E%512, CRC-32C
// recomputed; every block gets a CRC-32C, also those copied with
// innodb_log_checksums=OFF), then zeros: the size is a multiple of 1 MiB with at
// least RedoSlack free. A log too long for one file (MaxFileSize) is split into
// consecutive files #ib_redo0, #ib_redo1, ... each full but the last. dir must
// hold no redo yet.
func WriteRedoDirFrom(r io.ReaderAt, size int64, endLSN uint64, dir, creator string) error {
	return writeRedoDir(r, size, endLSN, dir, creator, defaultLayout())
}

func writeRedoDir(r io.ReaderAt, size int64, e uint64, dir, creator string, lo layout) error {
	if err := checkCreator(creator); err != nil {
		return err
	}
	l, n, err := restoreRange(r, size, e)
	if err != nil {
		return err
	}
	plan, err := planFiles(l.first, n, lo)
	if err != nil {
		return err
	}
	redoDir, err := prepareRedoDir(dir)
	if err != nil {
		return err
	}
	w := &redoWriter{dir: redoDir, plan: plan, l: l, creator: creator}
	if err := w.write(r, n, e); err != nil {
		w.cleanup()
		return err
	}
	return w.publish()
}

// restoreRange reads a backup log's header and returns it with the number of
// blocks from its first to the one holding e.
func restoreRange(r io.ReaderAt, size int64, e uint64) (backupLog, int64, error) {
	l, err := readBackupLog(r, size)
	if err != nil {
		return l, 0, err
	}
	if err := validDataLSN(e); err != nil {
		return l, 0, fmt.Errorf("end LSN: %w", err)
	}
	if e < l.checkpoint {
		return l, 0, fmt.Errorf("end LSN %d is below the backup redo log's checkpoint %d", e, l.checkpoint)
	}
	n := int64((e-l.first)/BlockSize) + 1
	if n > l.blocks {
		return l, 0, fmt.Errorf("%w: the backup redo log holds %d blocks, LSN %d to %d, which do not reach the end LSN %d",
			ErrCorrupt, l.blocks, l.first, l.first+uint64(l.blocks)*BlockSize, e)
	}
	if l.header.UUID == 0 {
		return l, 0, fmt.Errorf("%w: backup redo log header has log_uuid 0", ErrCorrupt)
	}
	return l, n, nil
}

// prepareRedoDir creates dir/#innodb_redo if needed and refuses a directory that
// holds redo already (#ib_redo files, or ib_logfile* of the pre-8.0.30 layout).
func prepareRedoDir(dir string) (string, error) {
	old, _ := filepath.Glob(filepath.Join(dir, "ib_logfile*"))
	if len(old) > 0 {
		return "", fmt.Errorf("%s holds redo of the pre-8.0.30 layout (%s): remove it first", dir, filepath.Base(old[0]))
	}
	redoDir := filepath.Join(dir, DirName)
	if err := os.MkdirAll(redoDir, 0o750); err != nil {
		return "", fmt.Errorf("create redo directory: %w", err)
	}
	entries, err := os.ReadDir(redoDir)
	if err != nil {
		return "", fmt.Errorf("read redo directory: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), filePrefix) {
			return "", fmt.Errorf("%s already holds %s: remove the old redo files first", redoDir, e.Name())
		}
	}
	return redoDir, nil
}

// redoWriter writes the planned files under temporary names, then renames them.
type redoWriter struct {
	dir     string
	plan    []plannedFile
	l       backupLog
	creator string
	temps   []string
	cur     *os.File
	bw      *bufio.Writer
	left    int64 // blocks still to write into cur
}

// write copies n verified blocks, the last cut at e, into the planned files.
func (w *redoWriter) write(r io.ReaderAt, n int64, e uint64) error {
	last := e / BlockSize * BlockSize
	err := eachBlock(r, w.l, n, func(b []byte, lsn uint64, dataLen int, noCRC bool) error {
		switch {
		case lsn == last && dataLen < int(e%BlockSize):
			return fmt.Errorf("%w: backup redo log ends at LSN %d, before the end LSN %d", ErrCorrupt, lsn+uint64(dataLen), e)
		case lsn == last:
			cutBlock(b, int(e%BlockSize))
		case dataLen < BlockSize:
			return fmt.Errorf("%w: backup redo log block at LSN %d is partial (data_len %d) before the end LSN %d", ErrCorrupt, lsn, dataLen, e)
		case noCRC:
			sealBlock(b)
		}
		return w.block(b)
	})
	if err != nil {
		return err
	}
	return w.closeFile()
}

// block appends one block, opening the next planned file when the current is full.
func (w *redoWriter) block(b []byte) error {
	if w.cur == nil || w.left == 0 {
		if err := w.closeFile(); err != nil {
			return err
		}
		if err := w.openFile(len(w.temps)); err != nil {
			return err
		}
	}
	w.left--
	if _, err := w.bw.Write(b); err != nil {
		return fmt.Errorf("write redo file: %w", err)
	}
	return nil
}

// openFile creates planned file i under a temporary name and writes its header.
func (w *redoWriter) openFile(i int) error {
	p := w.plan[i]
	path := filepath.Join(w.dir, FileName(uint64(i))+".partial")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("create redo file: %w", err)
	}
	w.temps, w.cur, w.left = append(w.temps, path), f, p.blocks
	w.bw = bufio.NewWriterSize(f, scanChunk)
	h := Header{Format: Format, UUID: w.l.header.UUID, StartLSN: p.start, Creator: w.creator}
	if i < len(w.plan)-1 {
		h.Flags = FlagFileFull
	}
	var cp uint64
	if i == 0 {
		cp = w.l.checkpoint
	}
	if _, err := w.bw.Write(FileHeader(h, cp)); err != nil {
		return fmt.Errorf("write redo file header: %w", err)
	}
	return nil
}

// closeFile flushes, sizes and syncs the current file.
func (w *redoWriter) closeFile() error {
	if w.cur == nil {
		return nil
	}
	f := w.cur
	w.cur = nil
	err := w.bw.Flush()
	if err == nil {
		err = f.Truncate(w.plan[len(w.temps)-1].size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write redo file %s: %w", f.Name(), err)
	}
	return nil
}

// publish renames the written files to their final names and syncs the directory.
func (w *redoWriter) publish() error {
	if len(w.temps) != len(w.plan) {
		w.cleanup()
		return fmt.Errorf("wrote %d redo files of %d planned", len(w.temps), len(w.plan))
	}
	for _, tmp := range w.temps {
		if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".partial")); err != nil {
			w.cleanup()
			return fmt.Errorf("rename redo file: %w", err)
		}
	}
	d, err := os.Open(w.dir)
	if err != nil {
		return fmt.Errorf("sync redo directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync redo directory: %w", err)
	}
	return nil
}

// cleanup removes whatever files were written, under either name.
func (w *redoWriter) cleanup() {
	if w.cur != nil {
		w.cur.Close()
		w.cur = nil
	}
	for _, tmp := range w.temps {
		err := os.Remove(tmp)
		if errors.Is(err, os.ErrNotExist) {
			os.Remove(strings.TrimSuffix(tmp, ".partial"))
		}
	}
}
