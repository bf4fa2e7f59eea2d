package binlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"
)

// FileSegments is one archived binlog file: its segments in order.
type FileSegments struct {
	File string
	Segs []Segment
}

// End is the offset after the file's last archived byte.
func (f FileSegments) End() int64 { return f.Segs[len(f.Segs)-1].End }

// ByFile groups ordered segments by file.
func ByFile(segs []Segment) []FileSegments {
	var out []FileSegments
	for _, s := range segs {
		if len(out) == 0 || out[len(out)-1].File != s.File {
			out = append(out, FileSegments{File: s.File})
		}
		last := &out[len(out)-1]
		last.Segs = append(last.Segs, s)
	}
	return out
}

// Contiguous checks that a file's segments cover it from its first byte with no hole
// and no overlap.
func (f FileSegments) Contiguous() error {
	var at int64
	for _, s := range f.Segs {
		switch {
		case s.Start > at:
			return fmt.Errorf("binlog archive: %s has no bytes %d to %d (a hole between segments)", f.File, at, s.Start)
		case s.Start < at:
			return fmt.Errorf("binlog archive: %s holds bytes %d to %d twice (overlapping segments %s)", f.File, s.Start, at, s.Key)
		}
		at = s.End
	}
	return nil
}

// EventFunc is called for each event read; returning stop ends the walk.
type EventFunc func(d *Decoder, e Event) (stop bool, err error)

// walkFile reads a file's Format_description, calls start with it, then calls fn for
// each event that starts at or after from (an event boundary past the
// Format_description), each checked against its checksum. It reports whether fn
// stopped the walk.
func (a *Archive) walkFile(ctx context.Context, f FileSegments, from int64, start func(*Decoder, Event) error, fn EventFunc) (bool, error) {
	if err := f.Contiguous(); err != nil {
		return false, err
	}
	first, err := a.Read(ctx, f.Segs[0])
	if err != nil {
		return false, err
	}
	if len(first) < len(fileMagic) || string(first[:len(fileMagic)]) != fileMagic {
		return false, fmt.Errorf("binlog archive: %s does not start with the binlog magic bytes", f.File)
	}
	fde, err := SplitEvent(first[len(fileMagic):], int64(len(fileMagic)))
	if err != nil {
		return false, fmt.Errorf("binlog archive: %s: its Format_description: %w", f.File, err)
	}
	d, err := NewDecoder(fde)
	if err != nil {
		return false, fmt.Errorf("binlog archive: %s: %w", f.File, err)
	}
	if from < fde.End {
		from = fde.End
	}
	if err := start(d, fde); err != nil {
		return false, err
	}
	for i, s := range f.Segs {
		if s.End <= from {
			continue
		}
		b, off := first[len(fileMagic):], int64(len(fileMagic))
		if i > 0 {
			off = s.Start
			if b, err = a.Read(ctx, s); err != nil {
				return false, err
			}
		}
		stop, err := eventsOf(d, f.File, b, off, from, fn)
		if stop || err != nil {
			return stop, err
		}
	}
	return false, nil
}

// eventsOf walks the events of one segment's bytes b (at offset off), calling fn for
// those at or after from. A segment holds whole events.
func eventsOf(d *Decoder, file string, b []byte, off, from int64, fn EventFunc) (bool, error) {
	pos := off
	for len(b) > 0 {
		e, err := SplitEvent(b, pos)
		if errors.Is(err, ErrShort) {
			return false, fmt.Errorf("binlog archive: %s: a segment ends inside the event at offset %d", file, pos)
		}
		if err != nil {
			return false, fmt.Errorf("binlog archive: %s: %w", file, err)
		}
		b, pos = b[len(e.Raw):], e.End
		if e.Start < from {
			if e.End > from {
				return false, fmt.Errorf("binlog archive: %s: no event starts at offset %d", file, from)
			}
			continue
		}
		if e.LogPos != 0 && int64(e.LogPos) != e.End {
			return false, fmt.Errorf("binlog archive: %s: the event at offset %d says it ends at %d, not %d", file, e.Start, e.LogPos, e.End)
		}
		if err := d.Check(e); err != nil {
			return false, fmt.Errorf("binlog archive: %s: %w", file, err)
		}
		if stop, err := fn(d, e); stop || err != nil {
			return stop, err
		}
	}
	return false, nil
}

// isGroupEvent says whether an event belongs inside a transaction group (between its
// GTID event and its end); the others (Rotate, Stop, Gtid_list, Binlog_checkpoint,
// Format_description, Start_encryption) stand between groups.
func isGroupEvent(t replication.EventType) bool {
	switch t {
	case replication.ROTATE_EVENT, replication.STOP_EVENT, replication.FORMAT_DESCRIPTION_EVENT,
		replication.MARIADB_GTID_LIST_EVENT, replication.MARIADB_BINLOG_CHECKPOINT_EVENT,
		replication.MARIADB_START_ENCRYPTION_EVENT, replication.MARIADB_GTID_EVENT, replication.HEARTBEAT_EVENT:
		return false
	}
	return true
}
