package mysqlredo

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DirName is the directory of the redo files under innodb_log_group_home_dir.
const DirName = "#innodb_redo"

// filePrefix starts the name of every redo file; spares end in "_tmp".
const filePrefix = "#ib_redo"

// File is one redo file in use: #ib_redo<ID>, holding the log from StartLSN to EndLSN.
type File struct {
	ID         uint64
	Path       string
	Header     Header
	Size       int64  // file size, header included
	StartLSN   uint64 // Header.StartLSN
	EndLSN     uint64 // StartLSN + Size - HeaderSize: where the next file starts
	Checkpoint uint64 // the newer valid checkpoint in the file's range, 0 if none
}

// FileName returns the name of the redo file with that id.
func FileName(id uint64) string { return filePrefix + strconv.FormatUint(id, 10) }

// parseFileName returns the id of a redo file name, or false for other names
// (spares "#ib_redoN_tmp" included).
func parseFileName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, filePrefix)
	if !ok || digits == "" || len(digits) > 19 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil
}

// ListFiles reads the header of every #ib_redoN in dir (not the "_tmp" spares) and
// returns them by id. A file that vanishes while listed (the server consumed it)
// is left out; a file that cannot be read or has an invalid header is an error.
func ListFiles(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list redo files: %w", err)
	}
	var files []File
	for _, e := range entries {
		id, ok := parseFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		f, err := readFile(filepath.Join(dir, e.Name()), id)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b File) int { return cmp.Compare(a.ID, b.ID) })
	return files, nil
}

// readFile reads the header of the redo file at path.
func readFile(path string, id uint64) (File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("open redo file: %w", err)
	}
	defer fh.Close()
	return statFile(fh, path, id)
}

// statFile reads the header and size of an open redo file.
func statFile(fh *os.File, path string, id uint64) (File, error) {
	st, err := fh.Stat()
	if err != nil {
		return File{}, fmt.Errorf("redo file %s: %w", path, err)
	}
	head := make([]byte, HeaderSize)
	if _, err := io.ReadFull(io.NewSectionReader(fh, 0, HeaderSize), head); err != nil {
		return File{}, fmt.Errorf("%w: redo file %s: header: %w", ErrCorrupt, path, err)
	}
	h, err := ParseHeader(head)
	if err != nil {
		return File{}, fmt.Errorf("redo file %s: %w", path, err)
	}
	size := st.Size()
	if size < HeaderSize+BlockSize || (size-HeaderSize)%BlockSize != 0 || size > MaxFileSize {
		return File{}, fmt.Errorf("%w: redo file %s: size %d is not %d bytes of header plus whole blocks (at most %d)",
			ErrCorrupt, path, size, HeaderSize, int64(MaxFileSize))
	}
	end := h.StartLSN + uint64(size-HeaderSize)
	return File{ID: id, Path: path, Header: h, Size: size, StartLSN: h.StartLSN, EndLSN: end,
		Checkpoint: headerCheckpoint(head, h.StartLSN, end)}, nil
}

// Checkpoint returns the newest checkpoint LSN in the redo files of dir (a
// server's #innodb_redo): the largest valid checkpoint block that lies in its
// file's range, as mysqld's recovery picks it.
func Checkpoint(dir string) (uint64, error) {
	files, err := ListFiles(dir)
	if err != nil {
		return 0, err
	}
	_, cp, err := newestCheckpoint(files)
	return cp, err
}

// newestCheckpoint returns the file holding the newest checkpoint and its LSN. It
// fails when the files are not one server's log (format, log_uuid).
func newestCheckpoint(files []File) (File, uint64, error) {
	if len(files) == 0 {
		return File{}, 0, errors.New("no redo files (#ib_redoN): is this a MySQL 8.0.30 or later #innodb_redo directory?")
	}
	var best File
	for _, f := range files {
		if f.Header.UUID != files[0].Header.UUID {
			return File{}, 0, fmt.Errorf("%w: %s has log_uuid %#x, %s %#x", ErrCorrupt, f.Path, f.Header.UUID, files[0].Path, files[0].Header.UUID)
		}
		if f.Checkpoint > best.Checkpoint {
			best = f
		}
	}
	if best.Checkpoint == 0 {
		return File{}, 0, fmt.Errorf("%w: no valid checkpoint in %d redo files", ErrCorrupt, len(files))
	}
	return best, best.Checkpoint, nil
}
