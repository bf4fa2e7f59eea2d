package binlog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/timefmt"
)

// Target is the point a restore stops at: right after the group with GTID, or after
// the last group whose timestamp is at or before Time.
type Target struct {
	GTID *GTID
	Time time.Time
}

// String describes the target.
func (t Target) String() string {
	if t.GTID != nil {
		return "GTID " + t.GTID.String()
	}
	return "time " + timefmt.Format(t.Time)
}

// Plan is what a point-in-time restore applies: the archived groups from a backup's
// position to the target, written as relay logs.
type Plan struct {
	From   Position // the backup's binlog position
	Until  Position // after the last group to apply (From if none)
	State  State    // the binlog GTID state at Until
	Last   *Group   // the last group to apply; nil if none
	Groups int64
	Bytes  int64
	// RelayIndex and RelayFiles are the relay logs written (absolute paths); the first
	// is read from RelayPos.
	RelayIndex string
	RelayFiles []string
	RelayPos   int64
	ServerIDs  map[uint32]bool // server ids of the events to apply
}

// ErrNotInArchive means the archive does not reach the target.
var ErrNotInArchive = errors.New("target not in the binlog archive")

// PlanReplay walks the archive from a backup's position and GTID state to the target,
// writing the events to apply as relay logs into relayDir (created; the caller removes
// it). It checks that the archive is continuous on the way: every segment there, every
// event's checksum, every file's Gtid_list equal to the state the files before it
// reached.
func (a *Archive) PlanReplay(ctx context.Context, from Position, state State, t Target, relayDir string) (*Plan, error) {
	segs, err := a.Segments(ctx)
	if err != nil {
		return nil, err
	}
	files := ByFile(segs)
	i := slices.IndexFunc(files, func(f FileSegments) bool { return f.File == from.File })
	if i < 0 {
		return nil, fmt.Errorf("%w: the backup's binlog position %s is not in the binlog archive at %s (was the archiver running then?)", ErrNotInArchive, from, a.Location())
	}
	if err := os.MkdirAll(relayDir, 0o750); err != nil {
		return nil, fmt.Errorf("create relay log directory: %w", err)
	}
	p := &Plan{From: from, Until: from, State: state.Clone(), ServerIDs: map[uint32]bool{}}
	w := &relayWriter{dir: relayDir, plan: p}
	done, err := a.walkTo(ctx, files[i:], from, t, p, w)
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if !done {
		return nil, a.notReached(t, p)
	}
	if err := w.writeIndex(); err != nil {
		return nil, err
	}
	return p, nil
}

// walkTo walks the files in order, from the position in the first, until the target
// is reached (true).
func (a *Archive) walkTo(ctx context.Context, files []FileSegments, from Position, t Target, p *Plan, w *relayWriter) (bool, error) {
	tr := &Tracker{state: p.State}
	for k, f := range files {
		off := int64(0)
		if k == 0 {
			off = from.Pos
		}
		start := func(d *Decoder, fde Event) error {
			tr.open = nil // a group cut off by the end of the file before was never committed
			return w.startFile(d, fde, f.File, max(off, fde.End))
		}
		reached := false
		stop, err := a.walkFile(ctx, f, off, start, func(d *Decoder, e Event) (bool, error) {
			if err := a.checkList(d, e, k, f.File, tr.state); err != nil {
				return false, err
			}
			began, done, err := tr.Step(d, f.File, e)
			if err != nil {
				return false, err
			}
			if began != nil && t.GTID == nil && began.Time.After(t.Time) {
				reached = true
				return true, nil
			}
			if err := w.event(e); err != nil {
				return false, err
			}
			if done != nil {
				p.Groups++
				p.Last, p.Until = done, done.End
				p.ServerIDs[done.GTID.Server] = true
				reached = t.GTID != nil && *t.GTID == done.GTID
				if !reached && t.GTID != nil && done.GTID.Domain == t.GTID.Domain && done.GTID.Seq > t.GTID.Seq {
					return false, fmt.Errorf("%w: GTID %s is not in the binlog archive: domain %d goes from %s on to %s", ErrNotInArchive, t.GTID, t.GTID.Domain, p.Last.GTID, done.GTID)
				}
				return reached, nil
			}
			return false, nil
		})
		if err != nil || stop {
			return reached, err
		}
	}
	return false, nil
}

// checkList compares a later file's Gtid_list event with the state the archive reached
// before it: a difference means transactions are missing between the files.
func (a *Archive) checkList(d *Decoder, e Event, k int, file string, state State) error {
	if k == 0 || e.Type != 163 { // MARIADB_GTID_LIST_EVENT
		return nil
	}
	list, err := d.GTIDList(e)
	if err != nil {
		return fmt.Errorf("binlog archive: %s: %w", file, err)
	}
	if !list.Equal(state) {
		return fmt.Errorf("%w: the binlog archive has a gap before %s: the server's GTID state was %s when that file began, the archive reaches %s before it (binlogs purged before they were archived?): restore to a point before the gap, or from a backup taken after it", ErrGap, file, list, state)
	}
	return nil
}

// ErrGap means the archive is not continuous where a restore needs it.
var ErrGap = errors.New("gap in the binlog archive")

// notReached explains a target past the archive's end.
func (a *Archive) notReached(t Target, p *Plan) error {
	last := "no transaction after the backup's position " + p.From.String()
	if p.Last != nil {
		last = fmt.Sprintf("the last archived transaction is %s at %s", p.Last.GTID, timefmt.Format(p.Last.Time))
	}
	if t.GTID != nil {
		return fmt.Errorf("%w: GTID %s is not in the binlog archive after the backup (%s); check the GTID, or wait for the archiver to store it", ErrNotInArchive, t.GTID, last)
	}
	return setting.Errorf("%w: %s %s is past what the binlog archive shows (%s): a later commit may not be archived yet; use an earlier time or %s", ErrNotInArchive, setting.ToTime, timefmt.Format(t.Time), last, setting.ToGTID)
}

// relayWriter writes the events to apply as relay logs: each archived file becomes one
// relay log holding the file's Format_description, an artificial Rotate naming the
// file and position the events come from (as a replica's IO thread writes it), and the
// events.
type relayWriter struct {
	dir  string
	plan *Plan
	f    *os.File
	bw   *bufio.Writer
}

func (w *relayWriter) startFile(d *Decoder, fde Event, file string, from int64) error {
	if err := w.close(); err != nil {
		return err
	}
	name := filepath.Join(w.dir, fmt.Sprintf("relay.%06d", len(w.plan.RelayFiles)+1))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("relay log: %w", err)
	}
	w.f, w.bw = f, bufio.NewWriterSize(f, 1<<20)
	if len(w.plan.RelayFiles) == 0 {
		w.plan.RelayPos = int64(len(fileMagic) + len(fde.Raw))
	}
	w.plan.RelayFiles = append(w.plan.RelayFiles, name)
	w.bw.WriteString(fileMagic)
	w.bw.Write(fde.Raw)
	_, err = w.bw.Write(d.RotateEvent(file, from))
	return err
}

func (w *relayWriter) event(e Event) error {
	w.plan.Bytes += int64(len(e.Raw))
	_, err := w.bw.Write(e.Raw)
	return err
}

func (w *relayWriter) close() error {
	if w.f == nil {
		return nil
	}
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err != nil {
		return fmt.Errorf("relay log: %w", err)
	}
	return nil
}

func (w *relayWriter) writeIndex() error {
	w.plan.RelayIndex = filepath.Join(w.dir, "relay.index")
	data := strings.Join(w.plan.RelayFiles, "\n") + "\n"
	if err := os.WriteFile(w.plan.RelayIndex, []byte(data), 0o640); err != nil {
		return fmt.Errorf("relay log index: %w", err)
	}
	return nil
}
