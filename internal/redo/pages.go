package redo

import (
	"fmt"
	"sort"
	"sync"
)

// PageID names one page: its tablespace id and page number.
type PageID struct {
	Space uint32
	Page  uint32
}

// PageSet records the pages the copied redo touched: MariaDB's missing changed-page
// tracking. The tailer adds to it from Run's goroutine while the engine takes what it
// has gathered, so it is safe for concurrent use. Its bound keeps a runaway log from
// taking the host's memory: past Max distinct pages it stops recording and says so
// (the engine then falls back to reading every page).
type PageSet struct {
	mu       sync.Mutex
	pages    map[PageID]struct{}
	max      int
	overflow bool
}

// DefaultMaxPages bounds a PageSet: 4 M pages (64 GiB of 16 KiB pages) take about
// 200 MiB of memory.
const DefaultMaxPages = 4 << 20

// NewPageSet returns an empty set holding at most max pages (DefaultMaxPages if max
// is 0 or less).
func NewPageSet(max int) *PageSet {
	if max <= 0 {
		max = DefaultMaxPages
	}
	return &PageSet{pages: map[PageID]struct{}{}, max: max}
}

// Add records pages (the tailer adds those of each mini-transaction it copies).
func (s *PageSet) Add(ids ...PageID) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.overflow {
			return
		}
		s.pages[id] = struct{}{}
		if len(s.pages) > s.max {
			s.overflow, s.pages = true, map[PageID]struct{}{}
		}
	}
}

// Take returns the pages recorded since the last Take, by tablespace in page order,
// and starts a new set. ok is false if the set overflowed its bound since the last
// Take: some pages were not recorded, and the caller must read every page instead.
func (s *PageSet) Take() (pages map[uint32][]uint32, ok bool) {
	s.mu.Lock()
	taken, overflow := s.pages, s.overflow
	s.pages, s.overflow = map[PageID]struct{}{}, false
	s.mu.Unlock()
	pages = map[uint32][]uint32{}
	for id := range taken {
		pages[id.Space] = append(pages[id.Space], id.Page)
	}
	for _, p := range pages {
		sort.Slice(p, func(i, j int) bool { return p[i] < p[j] })
	}
	return pages, !overflow
}

// LenWhere is the number of pages recorded since the last Take in the tablespaces
// for which in returns true.
func (s *PageSet) LenWhere(in func(space uint32) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range s.pages {
		if in(id.Space) {
			n++
		}
	}
	return n
}

// Len is the number of pages recorded since the last Take.
func (s *PageSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pages)
}

// mtrPages returns the pages that the records of one valid mini-transaction touch;
// recs are its record bytes up to the sequence byte, decrypted. A page record names
// its page (varint space id, varint page number after the header) unless its
// same-page bit is set; the file-level records that may lead the mini-transaction
// (high bit set before any page record) name no page. ids is reused.
func mtrPages(recs []byte, ids []PageID) ([]PageID, error) {
	ids = ids[:0]
	page := false // a page record was seen: a set high bit now means "same page"
	for p := 0; p < len(recs) && recs[p] > 1; {
		n, st := recordLen(recs[p:])
		if st.status != mtrOK || p+n > len(recs) {
			return nil, fmt.Errorf("record at offset %d: bad length", p)
		}
		b := recs[p]
		switch {
		case b&0x80 != 0 && !page: // file-level record
		case b&0x80 != 0: // same page as the record before
		default:
			page = true
			body := recordBody(recs[p : p+n])
			space, k := decodeVarint(body)
			if k == 0 || k > len(body) || space > 0xFFFFFFFF {
				return nil, fmt.Errorf("page record at offset %d: bad space id", p)
			}
			no, m := decodeVarint(body[k:])
			if m == 0 || k+m > len(body) || no > 0xFFFFFFFF {
				return nil, fmt.Errorf("page record at offset %d: bad page number", p)
			}
			ids = append(ids, PageID{Space: uint32(space), Page: uint32(no)})
		}
		p += n
	}
	return ids, nil
}
