package verify

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
)

// held records which pages each delta of a chain holds, as verify reads them.
type held struct {
	mu     sync.Mutex
	deltas map[heldKey]*deltaHeld
}

type heldKey struct{ backup, path string }

// deltaHeld is what one delta holds: how many pages, the highest page number, and
// whether page 0 is among them.
type deltaHeld struct {
	n     int
	last  uint32
	page0 bool
}

func newHeld() *held { return &held{deltas: map[heldKey]*deltaHeld{}} }

// note returns the function checkDelta calls with each page of backup id's delta f
// (nil for other files and for the system tablespace, which is never replaced).
func (h *held) note(id string, f *manifest.File) func(uint32) {
	if f.Kind != manifest.KindDelta || f.Space == nil || f.Space.System {
		return nil
	}
	k := heldKey{id, f.Path}
	return func(no uint32) {
		h.mu.Lock()
		defer h.mu.Unlock()
		d := h.deltas[k]
		if d == nil {
			d = &deltaHeld{}
			h.deltas[k] = d
		}
		d.n++
		d.last = max(d.last, no)
		d.page0 = d.page0 || no == 0
	}
}

// of returns what backup id's delta at path holds (nothing if no page was noted).
func (h *held) of(id, path string) deltaHeld {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := h.deltas[heldKey{id, path}]; d != nil {
		return *d
	}
	return deltaHeld{}
}

// rebuilt is a tablespace as restoring the chain so far makes it: its size in pages
// and whether page 0 (by which applying finds the file, and which InnoDB opens it
// by) is there.
type rebuilt struct {
	pages int64
	page0 bool
	from  string // the backup whose copy or delta last made or replaced it
	// changedOnly: first met in a delta that is not whole: the chain holds only the
	// pages changed since a base that never held the tablespace
	changedOnly bool
}

// checkRebuilt rebuilds each tablespace of a chain from its full backup's copies and
// the incrementals' deltas, as restore applies them (docs/incremental.md), and fails
// if a tablespace the newest backup lists would be restored empty or without its
// page 0: an incremental that left out a tablespace replaced since its base (an
// import), as ferry before issue 22 did.
func checkRebuilt(chain []*manifest.Manifest, h *held) error {
	if len(chain) < 2 {
		return nil
	}
	spaces := map[uint32]*rebuilt{}
	for _, m := range chain {
		cancelled := cancelledDeltas(m)
		for _, f := range m.Files {
			s := f.Space
			switch {
			case s == nil || s.System:
			case f.Kind == manifest.KindInnoDB:
				ps := int64(innodb.SpaceFlags(s.Flags).PhysicalSize())
				spaces[s.ID] = &rebuilt{pages: f.Size / ps, page0: f.Size >= ps, from: m.ID}
			case f.Kind == manifest.KindDelta && !cancelled[f.Path]:
				r := spaces[s.ID]
				if r == nil || s.Whole {
					r = &rebuilt{changedOnly: !s.Whole}
					spaces[s.ID] = r
				}
				if d := h.of(m.ID, f.Path); d.n > 0 {
					r.pages, r.page0, r.from = max(r.pages, int64(d.last)+1), r.page0 || d.page0, m.ID
				}
			}
		}
	}
	last := chain[len(chain)-1]
	cancelled := cancelledDeltas(last)
	for _, f := range last.Files {
		s := f.Space
		if s == nil || s.System || cancelled[f.Path] || (f.Kind != manifest.KindDelta && f.Kind != manifest.KindInnoDB) {
			continue
		}
		if r := spaces[s.ID]; r == nil || r.pages == 0 || !r.page0 || r.changedOnly {
			table := strings.TrimSuffix(f.Path, ".delta")
			return fmt.Errorf("backup %s failed verification: %w: the chain would restore %s (space id %d) %s: neither %s nor an earlier backup of the chain holds it whole (imported or re-created since the base, and not copied whole): take a full backup",
				last.ID, repo.ErrDamaged, table, s.ID, emptyOrShort(r), f.Path)
		}
	}
	return nil
}

// emptyOrShort says how a rebuilt tablespace falls short.
func emptyOrShort(r *rebuilt) string {
	switch {
	case r == nil || r.pages == 0:
		return "empty"
	case r.changedOnly && r.page0:
		return fmt.Sprintf("from only the pages %s changed (no backup of the chain copied it whole)", r.from)
	}
	return fmt.Sprintf("without its page 0 (%d pages, last written by %s)", r.pages, r.from)
}

// cancelledDeltas are the deltas of m a DDL marker cancels: <t>.ibd.delta when m also
// holds <t>.del (an incremental stream cannot take back a delta it sent for a
// tablespace dropped or re-created during its copy).
func cancelledDeltas(m *manifest.Manifest) map[string]bool {
	out := map[string]bool{}
	for _, f := range m.Files {
		if t, ok := strings.CutSuffix(f.Path, ".del"); ok && f.Kind == manifest.KindDDL {
			out[t+".ibd.delta"] = true
		}
	}
	return out
}
