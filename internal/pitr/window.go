package pitr

import (
	"context"
	"fmt"
	"slices"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// Window is a stretch of time a restore can reach: from a backup's position to the
// archive's end, or to a gap.
type Window struct {
	From  *manifest.Manifest // the oldest backup the window starts at
	To    binlog.Position    // where the archive (or the stretch before a gap) ends
	Last  *binlog.Group      // the archive's last complete transaction, for the last window
	Gap   *binlog.Gap        // the gap that ends the window, if one does
	Start binlog.Position    // where the stretch of archive holding the window starts
}

// position is a backup's binlog position.
func position(m *manifest.Manifest) binlog.Position {
	return binlog.Position{File: m.Coordinates.BinlogFile, Pos: int64(m.Coordinates.BinlogPos)}
}

// Windows splits the archive at its gaps and finds, in each stretch, the oldest backup
// whose position lies in it: from there to the stretch's end is recoverable.
func Windows(ms []*manifest.Manifest, s *binlog.Summary) []Window {
	if s.Files == 0 {
		return nil
	}
	var out []Window
	start := s.First
	for i := 0; i <= len(s.Gaps); i++ {
		w := Window{Start: start, To: s.End, Last: s.LastGroup}
		if i < len(s.Gaps) {
			g := s.Gaps[i]
			w.To, w.Last, w.Gap = g.After, nil, &g
			start = g.Resumed
		}
		for _, m := range byPosition(ms) {
			if p := position(m); p.Compare(w.Start) >= 0 && p.Compare(w.To) <= 0 {
				w.From = m
				break
			}
		}
		if w.From != nil {
			out = append(out, w)
		}
	}
	return out
}

// byPosition keeps the backups with a binlog position, oldest position first.
func byPosition(ms []*manifest.Manifest) []*manifest.Manifest {
	var out []*manifest.Manifest
	for _, m := range ms {
		if m.Coordinates.BinlogFile != "" && binlog.CheckFile(m.Coordinates.BinlogFile) == nil {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *manifest.Manifest) int { return position(a).Compare(position(b)) })
	return out
}

// Prune is what expire removes from the binlog archive: the files before the oldest
// kept backup's binlog file (no kept backup needs them to reach the present), and the
// gap records before it.
type Prune struct {
	KeepFrom binlog.Position // the oldest kept backup's position; File "" keeps everything
	Keeper   string          // that backup's id
	Files    []binlog.FileSegments
	Gaps     []binlog.Gap
	Bytes    int64 // stored bytes of Files
}

// PlanPrune plans the pruning of the archive for the backups expire keeps.
func PlanPrune(ctx context.Context, a *binlog.Archive, kept []*manifest.Manifest) (*Prune, error) {
	p := &Prune{}
	ms := byPosition(kept)
	if len(ms) == 0 {
		return p, nil
	}
	p.KeepFrom, p.Keeper = position(ms[0]), ms[0].ID
	segs, err := a.Segments(ctx)
	if err != nil {
		return nil, err
	}
	for _, f := range binlog.ByFile(segs) {
		if binlog.CompareFiles(f.File, p.KeepFrom.File) >= 0 {
			break
		}
		p.Files = append(p.Files, f)
		for _, s := range f.Segs {
			p.Bytes += s.StoredSize
		}
	}
	gaps, err := a.Gaps(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range gaps {
		if binlog.CompareFiles(g.Resumed.File, p.KeepFrom.File) <= 0 {
			p.Gaps = append(p.Gaps, g)
		}
	}
	return p, nil
}

// Apply deletes what the plan lets go, oldest first: a failure leaves the archive
// holding a newer, still continuous, stretch.
func (p *Prune) Apply(ctx context.Context, a *binlog.Archive) error {
	for _, f := range p.Files {
		for _, s := range f.Segs {
			if err := a.Delete(ctx, s); err != nil {
				return fmt.Errorf("expire binlog %s: %w", f.File, err)
			}
		}
	}
	for _, g := range p.Gaps {
		if err := a.DeleteGap(ctx, g); err != nil {
			return fmt.Errorf("expire binlog gap record: %w", err)
		}
	}
	return nil
}

// After is the summary the archive will have once the plan is applied.
func (p *Prune) After(s *binlog.Summary) *binlog.Summary {
	out := *s
	if len(p.Files) == 0 {
		return &out
	}
	out.Files -= len(p.Files)
	out.StoredBytes -= p.Bytes
	out.First = binlog.Position{File: p.KeepFrom.File}
	out.Gaps = slices.DeleteFunc(slices.Clone(s.Gaps), func(g binlog.Gap) bool {
		return slices.ContainsFunc(p.Gaps, func(x binlog.Gap) bool { return x.After == g.After })
	})
	return &out
}
