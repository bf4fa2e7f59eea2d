package apply

import (
	"fmt"
	"strings"

	"github.com/ferry-backup/ferry/internal/redo"
)

// History is, for every page a backup's redo changes, its last group of records: what
// a page-for-page comparison names when a page differs.
type History struct {
	last map[redo.PageID]groupInfo
}

// groupInfo describes one group.
type groupInfo struct {
	start, end uint64
	types      string
	freed      bool
}

// ReadHistory scans the backup log at path (keys and algorithm for an encrypted one).
func ReadHistory(path string, keys redo.KeyFunc, algorithm string) (*History, error) {
	h := &History{last: map[redo.PageID]groupInfo{}}
	_, err := redo.ScanLinear(path, keys, algorithm, func(m redo.MTR) error {
		seen := map[redo.PageID][]string{}
		w := recWalker{recs: m.Recs}
		for w.next() {
			if w.file || w.typ == recOption {
				continue
			}
			seen[w.id] = append(seen[w.id], recordName(w.typ, w.body))
		}
		if w.err != nil {
			return fmt.Errorf("LSN %d: %w", m.Start, w.err)
		}
		for id, types := range seen {
			freed := types[len(types)-1] == "FREE_PAGE"
			if prev, ok := h.last[id]; ok && prev.freed && !freed && types[0] != "INIT_PAGE" {
				freed = true // records after FREE_PAGE without INIT_PAGE: still a freed page
			}
			h.last[id] = groupInfo{start: m.Start, end: m.End, types: strings.Join(types, ","), freed: freed}
		}
		return nil
	})
	return h, err
}

// Explain names the record types and LSNs of the last mini-transaction that changed a
// page, and tells whether the page's final state in the log is freed (FREE_PAGE).
func (h *History) Explain(space, page uint32) (desc string, freed bool) {
	g, ok := h.last[redo.PageID{Space: space, Page: page}]
	if !ok {
		return "no redo record", false
	}
	return fmt.Sprintf("%s at LSN %d-%d", g.types, g.start, g.end), g.freed
}
