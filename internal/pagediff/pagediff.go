// Package pagediff compares, page for page, two copies of one backup prepared in two
// ways: by the server's own recovery (mariadb-backup --prepare, the oracle) and by
// ferry's redo apply. Every byte of every InnoDB tablespace must agree except what
// Ignores lists, each with the reason the server's recovery itself leaves it
// undetermined.
package pagediff

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/ferry-backup/ferry/internal/innodb"
)

// Explainer tells, for a page, what the redo apply did to it last.
type Explainer interface {
	// Explain returns the record types and LSN range of the page's last applied
	// record group (e.g. "WRITE,EXTENDED/INSERT_HEAP_DYNAMIC at LSN 123456-123500"),
	// and whether the page's final log state is FREE_PAGE.
	Explain(space, page uint32) (desc string, freed bool)
}

// DecodeFunc returns the plaintext, uncompressed image of an encrypted or
// page_compressed page raw of tablespace space (flags from its page 0).
type DecodeFunc func(space uint32, pageNo uint32, flags innodb.SpaceFlags, raw []byte) ([]byte, error)

// Options tune a comparison. The zero value compares raw and explains nothing.
type Options struct {
	// Decode decrypts and decompresses pages before they are compared; nil compares
	// such pages raw and marks their mismatches Undecoded.
	Decode DecodeFunc
	// Explain, if set, describes mismatching pages and tells which pages were freed
	// (their content is then ignored).
	Explain Explainer
	// MaxMismatches bounds the mismatches listed in the Report (the rest are only
	// counted); 0 means 100.
	MaxMismatches int
}

// Dirs compares every page of every InnoDB tablespace in the prepared directories
// oracle (the server's recovery) and native (ferry's apply). A tablespace file present
// in only one of them is a mismatch. The error is for what stops the comparison (an
// unreadable directory or file); differences are in the Report.
func Dirs(oracle, native string, opt Options) (Report, error) {
	if opt.MaxMismatches <= 0 {
		opt.MaxMismatches = 100
	}
	var r Report
	layout, err := readLayout(oracle)
	if err != nil {
		return r, err
	}
	of, err := tablespaceFiles(oracle, layout)
	if err != nil {
		return r, err
	}
	nf, err := tablespaceFiles(native, layout)
	if err != nil {
		return r, err
	}
	for _, name := range onlyIn(of, nf) {
		r.add(Mismatch{File: name, Offset: -1, Problem: "only in the directory the server prepared"}, opt.MaxMismatches)
	}
	for _, name := range onlyIn(nf, of) {
		r.add(Mismatch{File: name, Offset: -1, Problem: "only in the directory ferry prepared"}, opt.MaxMismatches)
	}
	c := &comparer{oracle: oracle, native: native, opt: opt, r: &r, layout: layout}
	if err := c.system(of, nf); err != nil {
		return r, err
	}
	for _, name := range sortedKeys(of) {
		if !nf[name] || layout.isSystem(name) {
			continue
		}
		if err := c.space([]string{name}); err != nil {
			return r, err
		}
	}
	return r, nil
}

// onlyIn returns the names in a and not in b, sorted.
func onlyIn(a, b map[string]bool) []string {
	var out []string
	for _, n := range sortedKeys(a) {
		if !b[n] {
			out = append(out, n)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// comparer holds one comparison's inputs and its report.
type comparer struct {
	oracle, native string
	opt            Options
	r              *Report
	layout         layout
	desc           descriptors // of the tablespace being compared
}

// system compares the system tablespace, whose files present on both sides continue
// each other's page numbers.
func (c *comparer) system(of, nf map[string]bool) error {
	var files []string
	for _, name := range c.layout.systemFiles {
		if of[name] && nf[name] {
			files = append(files, name)
		}
	}
	if len(files) == 0 {
		return nil
	}
	return c.space(files)
}

// spaceInfo is what the comparison needs from a tablespace's page 0.
type spaceInfo struct {
	id     uint32
	flags  innodb.SpaceFlags
	crypt  bool // page 0 carries encryption metadata
	size   int  // physical page size
	parsed bool // read from a page 0 (else size is innodb_page_size and the rest zero)
}

// space compares one tablespace made of files (more than one only for the system
// tablespace), reading its flags from page 0 of the first file.
func (c *comparer) space(files []string) error {
	sp, err := c.header(files[0])
	if err != nil {
		return err
	}
	c.desc = descriptors{}
	var base uint32
	for _, name := range files {
		n, err := c.file(sp, name, base)
		if err != nil {
			return err
		}
		base += n
	}
	return nil
}

// header reads the tablespace's flags from page 0 on the oracle side, or on ferry's
// side if the oracle's does not parse (both are compared later anyway). Without a
// valid page 0 on either side (a deferred tablespace never written) the pages are
// compared in units of innodb_page_size.
func (c *comparer) header(name string) (spaceInfo, error) {
	for _, dir := range []string{c.oracle, c.native} {
		b, err := readHead(filepath.Join(dir, name), maxPageSize)
		if err != nil {
			return spaceInfo{}, err
		}
		if h, err := innodb.ParseSpaceHeader(b); err == nil && !innodb.IsZero(b) {
			return spaceInfo{id: h.SpaceID, flags: h.Flags, crypt: h.CryptData, size: h.Flags.PhysicalSize(), parsed: true}, nil
		}
	}
	return spaceInfo{size: c.layout.pageSize}, nil
}

// maxPageSize is innodb_page_size's largest value.
const maxPageSize = 65536

// readHead reads up to n bytes from the start of path.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b[:m], nil
}

// file compares one file of tablespace sp whose first page is page base, and returns
// how many pages the oracle's file holds.
func (c *comparer) file(sp spaceInfo, name string, base uint32) (uint32, error) {
	fo, err := os.Open(filepath.Join(c.oracle, name))
	if err != nil {
		return 0, err
	}
	defer fo.Close()
	fn, err := os.Open(filepath.Join(c.native, name))
	if err != nil {
		return 0, err
	}
	defer fn.Close()
	lo, err := size(fo)
	if err != nil {
		return 0, err
	}
	ln, err := size(fn)
	if err != nil {
		return 0, err
	}
	if lo != ln {
		c.r.Lengths = append(c.r.Lengths, LengthDiff{File: name, Oracle: lo, Native: ln})
	}
	c.r.Files++
	pages := min(lo, ln) / int64(sp.size)
	a, b := make([]byte, sp.size), make([]byte, sp.size)
	for i := int64(0); i < pages; i++ {
		if _, err := io.ReadFull(fo, a); err != nil {
			return 0, fmt.Errorf("read %s in %s: %w", name, c.oracle, err)
		}
		if _, err := io.ReadFull(fn, b); err != nil {
			return 0, fmt.Errorf("read %s in %s: %w", name, c.native, err)
		}
		c.desc.track(sp, base+uint32(i), a, b)
		c.page(sp, name, base+uint32(i), a, b)
	}
	return uint32(lo / int64(sp.size)), nil
}

func size(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
