package apply

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/innodb"
	"golang.org/x/sys/unix"
)

// DataFile is one file of the system tablespace (innodb_data_file_path), in order.
type DataFile struct {
	Name  string // relative to the datadir, e.g. "ibdata1"
	Pages uint64 // its size in pages; the last file may be longer (autoextend)
}

// segment is one file of a tablespace and the pages it holds from first on.
type segment struct {
	f     *os.File
	path  string
	first uint64
	pages uint64 // 0: unbounded (the last file)
}

// space is one tablespace whose pages the redo changes.
type space struct {
	id       uint32
	segs     []segment
	flags    innodb.SpaceFlags
	hasFlags bool               // flags known (from page 0 or from the redo of a deferred space)
	deferred bool               // page 0 in the file is not valid: the redo builds it (CREATE TABLE)
	crypt    bool               // page 0 carries encryption metadata
	codec    *innodb.SpaceCodec // decrypts/decompresses reads, compresses/encrypts writes; nil if neither
	codecSet bool               // a deferred space's codec was looked for once its page 0 was built
}

// path names the tablespace's (first) file.
func (s *space) path() string { return s.segs[0].path }

// physSize is the size of one page in the file.
func (s *space) physSize() int { return s.flags.PhysicalSize() }

// locate returns the file and offset of page no.
func (s *space) locate(no uint32) (*os.File, int64) {
	p, ps := uint64(no), int64(s.physSize())
	for i, g := range s.segs {
		if g.pages == 0 || p < g.first+g.pages || i == len(s.segs)-1 {
			return g.f, int64(p-g.first) * ps
		}
	}
	return nil, 0
}

// readPage reads page no into b (len = physical size); past the end of the file it
// reads zeros, as the server does for a file it extends.
func (s *space) readPage(b []byte, no uint32) error {
	f, off := s.locate(no)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read page %d of %s: %w", no, s.path(), err)
	}
	clear(b[n:])
	return nil
}

// writePage writes page no from b.
func (s *space) writePage(b []byte, no uint32) error {
	f, off := s.locate(no)
	if _, err := f.WriteAt(b, off); err != nil {
		return fmt.Errorf("write page %d of %s: %w", no, s.path(), err)
	}
	return nil
}

// punch frees the blocks of page no (a freed page of a page_compressed tablespace, as
// the server punches it: reads then give zeros). A file system that cannot punch keeps
// the page as it is, as the server's write does there.
func (s *space) punch(no uint32) error {
	f, off := s.locate(no)
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, int64(s.physSize()))
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("punch page %d of %s: %w", no, s.path(), err)
	}
	return nil
}

// last is the file that grows when the tablespace does.
func (s *space) last() segment { return s.segs[len(s.segs)-1] }

// close closes the tablespace's files.
func (s *space) close() {
	for _, g := range s.segs {
		g.f.Close()
	}
}

// openSpaces opens every tablespace file under dir: the system tablespace's files,
// the undo tablespaces and every .ibd, keyed by space id. Files whose page 0 is not
// valid (a table created during the backup, whose page 0 the redo writes) are
// returned by name, for the redo's FILE_CREATE and FILE_MODIFY records to claim.
func openSpaces(dir string, data []DataFile) (map[uint32]*space, map[string]*os.File, error) {
	spaces, deferred := map[uint32]*space{}, map[string]*os.File{}
	fail := func(err error) (map[uint32]*space, map[string]*os.File, error) {
		closeAll(spaces, deferred)
		return nil, nil, err
	}
	sys, err := openSystem(dir, data)
	if err != nil {
		return fail(err)
	}
	spaces[0] = sys
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() || !isTablespaceFile(rel) {
			return nil
		}
		return addFile(path, rel, spaces, deferred)
	})
	if err != nil {
		return fail(err)
	}
	return spaces, deferred, nil
}

// isTablespaceFile tells whether rel (relative to the datadir) is an .ibd or an undo
// tablespace.
func isTablespaceFile(rel string) bool {
	base := filepath.Base(rel)
	return strings.HasSuffix(rel, ".ibd") || (rel == base && strings.HasPrefix(base, "undo") && len(base) == 7)
}

// addFile opens one .ibd or undo file and files it by space id, or as deferred.
func addFile(path, rel string, spaces map[uint32]*space, deferred map[string]*os.File) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	h, ok, err := readHeader(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if !ok {
		deferred[rel] = f
		return nil
	}
	if old, dup := spaces[h.SpaceID]; dup {
		f.Close()
		return fmt.Errorf("%s and %s both hold tablespace %d", old.path(), path, h.SpaceID)
	}
	spaces[h.SpaceID] = &space{id: h.SpaceID, segs: []segment{{f: f, path: path}}, flags: h.Flags, hasFlags: true, crypt: h.CryptData}
	return nil
}

// openSystem opens the system tablespace's files in order.
func openSystem(dir string, data []DataFile) (*space, error) {
	if len(data) == 0 {
		data = []DataFile{{Name: "ibdata1"}}
	}
	s := &space{id: 0}
	var first uint64
	for i, d := range data {
		path := filepath.Join(dir, d.Name)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("open system tablespace file: %w", err)
		}
		pages := d.Pages
		if i == len(data)-1 {
			pages = 0
		}
		s.segs = append(s.segs, segment{f: f, path: path, first: first, pages: pages})
		first += d.Pages
	}
	h, ok, err := readHeader(s.segs[0].f)
	if err != nil || !ok {
		s.close()
		return nil, fmt.Errorf("%s: page 0 is not valid (%v)", s.path(), err)
	}
	s.flags, s.hasFlags, s.crypt = h.Flags, true, h.CryptData
	return s, nil
}

// readHeader reads page 0's FSP header; ok is false when it is not valid (all zeros,
// or a wrong page number), as for a tablespace the redo creates.
func readHeader(f *os.File) (innodb.SpaceHeader, bool, error) {
	b := make([]byte, 1<<16)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return innodb.SpaceHeader{}, false, err
	}
	b = b[:n]
	if len(b) < 64 || binary.BigEndian.Uint32(b[4:]) != 0 {
		return innodb.SpaceHeader{}, false, nil
	}
	h, err := innodb.ParseSpaceHeader(b)
	if err != nil || innodb.IsZero(b[:64]) {
		return innodb.SpaceHeader{}, false, nil
	}
	if len(b) < h.Flags.PhysicalSize() {
		return innodb.SpaceHeader{}, false, nil
	}
	if cerr := innodb.NewChecker(h, h.SpaceID == 0).Check(b[:h.Flags.PhysicalSize()], 0); cerr != nil {
		return innodb.SpaceHeader{}, false, nil
	}
	return h, true, nil
}

// closeAll closes every file opened by openSpaces.
func closeAll(spaces map[uint32]*space, deferred map[string]*os.File) {
	for _, s := range spaces {
		s.close()
	}
	for _, f := range deferred {
		f.Close()
	}
}

// ParseDataFilePath reads innodb_data_file_path into the system tablespace's files
// and their sizes in pages.
func ParseDataFilePath(v string, pageSize int) ([]DataFile, error) {
	var files []DataFile
	for _, f := range strings.Split(v, ";") {
		parts := strings.Split(f, ":")
		if len(parts) < 2 {
			return nil, fmt.Errorf("innodb_data_file_path %q: %q has no size", v, f)
		}
		size, err := SizeValue(parts[1])
		if err != nil {
			return nil, fmt.Errorf("innodb_data_file_path %q: %w", v, err)
		}
		files = append(files, DataFile{Name: parts[0], Pages: uint64(size / pageSize)})
	}
	return files, nil
}

// SizeValue reads a size with an optional K, M, G or T suffix.
func SizeValue(s string) (int, error) {
	mult := 1
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 't', 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("size %q is not a positive number with an optional K, M, G or T", s)
	}
	return v * mult, nil
}
