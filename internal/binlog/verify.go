package binlog

import (
	"context"
	"fmt"
	"time"
)

// Summary describes the archive: what it holds and where it ends.
type Summary struct {
	Files       int
	Segments    int
	RawBytes    int64
	StoredBytes int64
	First, End  Position // the first file's start and the end of the archive
	LastGroup   *Group   // the last complete group (nil if none)
	LastEvent   time.Time
	Gaps        []Gap
	Groups      int64 // groups checked (Verify only)
	Problems    []string
}

// Summarize lists the archive and reads its last file to find where it ends, without
// reading the rest.
func (a *Archive) Summarize(ctx context.Context) (*Summary, error) {
	s, files, err := a.survey(ctx)
	if err != nil || len(files) == 0 {
		return s, err
	}
	return s, s.findLast(ctx, a, files)
}

// survey lists the archive's segments and gaps and counts what they hold.
func (a *Archive) survey(ctx context.Context) (*Summary, []FileSegments, error) {
	segs, err := a.Segments(ctx)
	if err != nil {
		return nil, nil, err
	}
	s := &Summary{Segments: len(segs)}
	if s.Gaps, err = a.Gaps(ctx); err != nil {
		return nil, nil, err
	}
	files := ByFile(segs)
	if len(files) > 0 {
		s.tally(files)
	}
	return s, files, nil
}

// findLast reads the archive backwards from its end, a segment at a time, until it
// meets a complete transaction: the last one.
func (s *Summary) findLast(ctx context.Context, a *Archive, files []FileSegments) error {
	for k := len(files) - 1; k >= 0 && s.LastGroup == nil; k-- {
		f := files[k]
		for i := len(f.Segs) - 1; i >= 0 && s.LastGroup == nil; i-- {
			tr := &Tracker{state: State{}}
			_, err := a.walkFile(ctx, f, f.Segs[i].Start, func(*Decoder, Event) error { return nil },
				func(d *Decoder, e Event) (bool, error) {
					if t := time.Unix(int64(e.Timestamp), 0).UTC(); t.After(s.LastEvent) {
						s.LastEvent = t
					}
					_, done, err := tr.Step(d, f.File, e)
					if done != nil {
						s.LastGroup = done
					}
					return false, err
				})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Summary) tally(files []FileSegments) {
	s.Files = len(files)
	for _, f := range files {
		for _, sg := range f.Segs {
			s.RawBytes += sg.End - sg.Start
			s.StoredBytes += sg.StoredSize
		}
	}
	s.First = Position{files[0].File, 0}
	s.End = Position{files[len(files)-1].File, files[len(files)-1].End()}
}

// Verify reads the whole archive: every segment against its checksum, every event
// against its own, every file from its first byte with no hole, and every file's
// Gtid_list against the GTID state the files before it reached. What is wrong is
// listed in Problems; recorded gaps are listed in Gaps, and a break the archive has
// no record of is a problem.
func (a *Archive) Verify(ctx context.Context) (*Summary, error) {
	s, files, err := a.survey(ctx)
	if err != nil {
		return nil, err
	}
	var state State
	for _, f := range files {
		state = s.verifyFile(ctx, a, f, state)
	}
	return s, nil
}

// verifyFile checks one file, continuing from the state the files before reached (nil
// for the first, or after a file that could not be read), and returns the state after it.
func (s *Summary) verifyFile(ctx context.Context, a *Archive, f FileSegments, before State) State {
	tr := &Tracker{state: State{}}
	first := true
	_, err := a.walkFile(ctx, f, 0, func(*Decoder, Event) error { return nil }, func(d *Decoder, e Event) (bool, error) {
		s.LastEvent = time.Unix(int64(e.Timestamp), 0).UTC()
		if first && e.Type == 163 {
			first = false
			list, err := d.GTIDList(e)
			if err != nil {
				return false, err
			}
			if before != nil && !list.Equal(before) && !s.gapBefore(f.File) {
				s.Problems = append(s.Problems, fmt.Sprintf("%s: GTIDs missing before it and no gap recorded: it began at %s, the files before it reach %s", f.File, list, before))
			}
			tr.state = list.Clone()
		}
		_, done, err := tr.Step(d, f.File, e)
		if done != nil {
			s.Groups++
			s.LastGroup = done
		}
		return false, err
	})
	if err != nil {
		s.Problems = append(s.Problems, err.Error())
		return nil
	}
	return tr.state
}

// gapBefore says whether a recorded gap ends at file.
func (s *Summary) gapBefore(file string) bool {
	for _, g := range s.Gaps {
		if g.Resumed.File == file {
			return true
		}
	}
	return false
}
