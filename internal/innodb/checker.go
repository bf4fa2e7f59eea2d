package innodb

import "fmt"

// CorruptPageError reports a page that failed validation: torn by a concurrent write
// (re-read it) or really damaged.
type CorruptPageError struct {
	PageNo uint32 // the page number that was expected at this position
	Reason string
}

// Error implements error.
func (e *CorruptPageError) Error() string {
	return fmt.Sprintf("innodb: page %d is corrupt: %s", e.PageNo, e.Reason)
}

// Checker validates the pages of one tablespace. It is immutable after NewChecker and
// safe for concurrent use.
type Checker struct {
	flags     SpaceFlags
	size      int  // physical page size
	crypt     bool // legacy pages with a key version are encrypted
	mysql     bool // pages of MySQL page compression and encryption are recognized
	dblwrLo   uint32
	dblwrHi   uint32 // pages [dblwrLo, dblwrHi) are not checked
	checkPage func(c *Checker, page []byte, pageNo uint32) string
}

// NewChecker returns a Checker for the tablespace described by h. system is true for
// the system tablespace (ibdata*, space 0), whose doublewrite buffer (two extents
// starting at the second extent, pages 64..191 with 16 KiB pages) holds copies of other
// pages and is skipped, as mariabackup does (MySQL 8.0 keeps the same area).
//
// The tablespace is MySQL's if h.Flavor is FlavorMySQL or its flags say so
// (SpaceFlags.MySQL). Its pages are checked as MariaDB's legacy pages, except that
// MySQL's compressed and encrypted pages (types 14..17) fail with an
// *UnsupportedPageError.
func NewChecker(h SpaceHeader, system bool) *Checker {
	c := &Checker{flags: h.Flags, size: h.Flags.PhysicalSize(), crypt: h.CryptData,
		mysql: h.Flavor == FlavorMySQL || h.Flags.MySQL()}
	switch {
	case h.Flags.FullCRC32():
		c.checkPage = (*Checker).checkFullCRC32
	case h.Flags.ZipSize() != 0:
		c.checkPage = (*Checker).checkZip
	default:
		c.checkPage = (*Checker).checkLegacy
	}
	if system {
		ext := uint32(extentPages(h.Flags.PageSize()))
		c.dblwrLo, c.dblwrHi = ext, 3*ext
	}
	return c
}

// PageSize returns the physical page size the Checker expects.
func (c *Checker) PageSize() int { return c.size }

// Check validates page, which was read at the position of page pageNo (counted from
// the start of the tablespace, so ibdata2 continues after ibdata1). It returns nil for
// a valid or all-zero page, a *CorruptPageError for a torn or damaged one, an
// *UnsupportedPageError for a MySQL page it cannot validate, and another error if
// page does not have the physical page size. Check does not allocate unless it fails.
func (c *Checker) Check(page []byte, pageNo uint32) error {
	if len(page) != c.size {
		return fmt.Errorf("innodb: check page %d: got %d bytes, page size is %d", pageNo, len(page), c.size)
	}
	if pageNo >= c.dblwrLo && pageNo < c.dblwrHi {
		return nil
	}
	if PageNo(page) != pageNo {
		if IsZero(page) {
			return nil
		}
		return &CorruptPageError{PageNo: pageNo, Reason: fmt.Sprintf("FIL_PAGE_OFFSET is %d", PageNo(page))}
	}
	if c.mysql {
		if err := checkMySQLType(page, pageNo); err != nil {
			return err
		}
	}
	if reason := c.checkPage(c, page, pageNo); reason != "" {
		return &CorruptPageError{PageNo: pageNo, Reason: reason}
	}
	return nil
}
