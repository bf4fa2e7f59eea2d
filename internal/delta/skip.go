package delta

import (
	"fmt"
	"log/slog"
)

// PageKey names one page a delta holds: its tablespace's space id and page number;
// for the system tablespace (space 0), which may span files whose deltas number
// their pages from each file's start, also the file.
type PageKey struct {
	Space uint32
	File  string // the file for space 0, "" otherwise
	Page  uint32
}

// keyOf is the PageKey of page no of a delta for rel with meta m.
func keyOf(m Meta, rel string, no uint32) PageKey {
	k := PageKey{Space: m.SpaceID, Page: no}
	if m.SpaceID == 0 {
		k.File = rel
	}
	return k
}

// ListPages calls fn with every page the deltas of the incremental directory inc
// hold, reading only their cluster headers. A tablespace sent whole (<t>.new) is not
// listed.
func ListPages(inc string, fn func(PageKey)) error {
	f, err := scanInc(inc)
	if err != nil {
		return err
	}
	a := &applier{inc: inc, log: slog.New(slog.DiscardHandler)}
	for _, x := range f.deltas {
		j, err := a.newJob(x, f)
		if err != nil {
			return err
		}
		if err := a.listJob(j, fn); err != nil {
			return fmt.Errorf("list pages of %s: %w", j.delta, err)
		}
	}
	return nil
}

// listJob passes the page numbers of j's delta to fn.
func (a *applier) listJob(j *job, fn func(PageKey)) error {
	r, in, err := a.openDelta(j)
	if err != nil {
		return err
	}
	defer in.Close()
	for !r.last {
		if err := r.readCluster(); err != nil {
			return err
		}
		for _, no := range r.nos {
			fn(keyOf(j.meta, j.rel, no))
		}
	}
	return nil
}
