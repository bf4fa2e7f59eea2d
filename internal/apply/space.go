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
	"sync"

	"github.com/ferry-backup/ferry/internal/innodb"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// DataFile is one file of the system tablespace (innodb_data_file_path), in order.
type DataFile struct {
	Name  string // relative to the datadir, e.g. "ibdata1"
	Pages uint64 // its size in pages; the last file may be longer (autoextend)
}

// segment is one file of a tablespace and the pages it holds from first on.
type segment struct {
	f     *os.File // nil while closed (space.open)
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
	mu       sync.Mutex         // guards the segments' files (open, close)
}

// path names the tablespace's (first) file.
func (s *space) path() string { return s.segs[0].path }

// physSize is the size of one page in the file.
func (s *space) physSize() int { return s.flags.PhysicalSize() }

// open opens the tablespace's files that are not open. The files of a tablespace are
// opened when a batch first needs them and closed again (release) when too many are
// open: a datadir of 100,000 tables must not need 100,000 descriptors.
func (s *space) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.segs {
		if s.segs[i].f != nil {
			continue
		}
		f, err := os.OpenFile(s.segs[i].path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", s.segs[i].path, err)
		}
		s.segs[i].f = f
	}
	return nil
}

// appendOpen appends the tablespace's open files to files.
func (s *space) appendOpen(files []*os.File) []*os.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.segs {
		if g.f != nil {
			files = append(files, g.f)
		}
	}
	return files
}

// isOpen tells whether the tablespace's files are open.
func (s *space) isOpen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.segs[0].f != nil
}

// locate returns the file and offset of page no, opening the files if need be.
func (s *space) locate(no uint32) (*os.File, int64, error) {
	if err := s.open(); err != nil {
		return nil, 0, err
	}
	p, ps := uint64(no), int64(s.physSize())
	for i, g := range s.segs {
		if g.pages == 0 || p < g.first+g.pages || i == len(s.segs)-1 {
			return g.f, int64(p-g.first) * ps, nil
		}
	}
	return nil, 0, fmt.Errorf("%s has no file", s.path())
}

// readPage reads page no into b (len = physical size); past the end of the file it
// reads zeros, as the server does for a file it extends.
func (s *space) readPage(b []byte, no uint32) error {
	f, off, err := s.locate(no)
	if err != nil {
		return err
	}
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read page %d of %s: %w", no, s.path(), err)
	}
	clear(b[n:])
	return nil
}

// writePage writes page no from b.
func (s *space) writePage(b []byte, no uint32) error {
	f, off, err := s.locate(no)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		return fmt.Errorf("write page %d of %s: %w", no, s.path(), err)
	}
	return nil
}

// punch frees the blocks of page no (a freed page of a page_compressed tablespace, as
// the server punches it: reads then give zeros). A file system that cannot punch keeps
// the page as it is, as the server's write does there.
func (s *space) punch(no uint32) error {
	f, off, err := s.locate(no)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, int64(s.physSize()))
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("punch page %d of %s: %w", no, s.path(), err)
	}
	return nil
}

// last is the file that grows when the tablespace does, opened.
func (s *space) last() (segment, error) {
	if err := s.open(); err != nil {
		return segment{}, err
	}
	return s.segs[len(s.segs)-1], nil
}

// close closes the tablespace's files (a later use opens them again).
func (s *space) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.segs {
		if s.segs[i].f != nil {
			s.segs[i].f.Close()
			s.segs[i].f = nil
		}
	}
}

// openSpaces finds every tablespace file under dir but the system tablespace's: the
// undo tablespaces and every .ibd, keyed by space id from their page 0 (read by
// scanWorkers at once, each file closed again). Files whose page 0 is not
// valid (a table created during the backup, whose page 0 the redo writes) are returned
// by name (relative path to full path), for the redo's FILE_CREATE and FILE_MODIFY
// records to claim.
func openSpaces(dir string) (map[uint32]*space, map[string]string, error) {
	var rels []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if !d.IsDir() && isTablespaceFile(rel) {
			rels = append(rels, rel)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	heads, err := readHeaders(dir, rels)
	if err != nil {
		return nil, nil, err
	}
	spaces, deferred := map[uint32]*space{}, map[string]string{}
	for i, rel := range rels {
		path, h := filepath.Join(dir, rel), heads[i]
		if !h.ok {
			deferred[rel] = path
			continue
		}
		if old, dup := spaces[h.SpaceID]; dup || h.SpaceID == 0 {
			if !dup {
				return nil, nil, fmt.Errorf("%s holds tablespace 0, the system tablespace's", path)
			}
			return nil, nil, fmt.Errorf("%s and %s both hold tablespace %d", old.path(), path, h.SpaceID)
		}
		spaces[h.SpaceID] = &space{id: h.SpaceID, segs: []segment{{path: path}}, flags: h.Flags, hasFlags: true, crypt: h.CryptData}
	}
	return spaces, deferred, nil
}

// scanWorkers is how many page 0 reads openSpaces has in flight: a datadir of many
// small tables, just written, is read back from the disk, one small read per file.
const scanWorkers = 16

// header is what readHeaders found in one file: its FSP header, and whether page 0 is valid.
type header struct {
	innodb.SpaceHeader
	ok bool
}

// readHeaders reads page 0 of each file (relative to dir), scanWorkers at a time.
func readHeaders(dir string, rels []string) ([]header, error) {
	out := make([]header, len(rels))
	var g errgroup.Group
	g.SetLimit(scanWorkers)
	for i, rel := range rels {
		g.Go(func() error {
			path := filepath.Join(dir, rel)
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("open %s: %w", path, err)
			}
			defer f.Close()
			h, ok, err := readHeader(f)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out[i] = header{h, ok}
			return nil
		})
	}
	return out, g.Wait()
}

// isTablespaceFile tells whether rel (relative to the datadir) is an .ibd or an undo
// tablespace.
func isTablespaceFile(rel string) bool {
	base := filepath.Base(rel)
	return strings.HasSuffix(rel, ".ibd") || (rel == base && strings.HasPrefix(base, "undo") && len(base) == 7)
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
	b, err := readHead(f, 16<<10) // the usual page size; a larger page is read again whole
	if err != nil {
		return innodb.SpaceHeader{}, false, err
	}
	if len(b) < 64 || binary.BigEndian.Uint32(b[4:]) != 0 {
		return innodb.SpaceHeader{}, false, nil
	}
	h, err := innodb.ParseSpaceHeader(b)
	if err != nil || innodb.IsZero(b[:64]) {
		return innodb.SpaceHeader{}, false, nil
	}
	if ps := h.Flags.PhysicalSize(); len(b) == 16<<10 && ps > len(b) && ps <= 1<<16 {
		if b, err = readHead(f, ps); err != nil {
			return innodb.SpaceHeader{}, false, err
		}
	}
	if len(b) < h.Flags.PhysicalSize() {
		return innodb.SpaceHeader{}, false, nil
	}
	if cerr := innodb.NewChecker(h, h.SpaceID == 0).Check(b[:h.Flags.PhysicalSize()], 0); cerr != nil {
		return innodb.SpaceHeader{}, false, nil
	}
	return h, true, nil
}

// readHead reads the first n bytes of f (fewer if it is shorter).
func readHead(f *os.File, n int) ([]byte, error) {
	b := make([]byte, n)
	k, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:k], nil
}

// closeAll closes every file of spaces.
func closeAll(spaces map[uint32]*space) {
	for _, s := range spaces {
		s.close()
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
