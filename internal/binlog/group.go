package binlog

import (
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

// Group is one transaction (or DDL statement) of the binlog: its GTID event to its end.
type Group struct {
	GTID  GTID
	Time  time.Time // the GTID event's timestamp (second resolution)
	Start Position  // of its GTID event
	End   Position  // after its last event
}

// Tracker follows transaction groups and the GTID state over a walk of events.
type Tracker struct {
	state  State
	open   *Group
	flags  byte
	queryN int
}

// NewTracker starts following groups from a GTID state.
func NewTracker(state State) *Tracker { return &Tracker{state: state} }

// Step feeds one event of file. began is the group whose GTID event e is; done the
// group e completes.
func (t *Tracker) Step(d *Decoder, file string, e Event) (began, done *Group, err error) {
	switch {
	case e.Type == replication.MARIADB_GTID_EVENT:
		g, flags, err := d.GTID(e)
		if err != nil {
			return nil, nil, fmt.Errorf("binlog archive: %s: %w", file, err)
		}
		t.open = &Group{GTID: g, Time: time.Unix(int64(e.Timestamp), 0).UTC(), Start: Position{file, e.Start}}
		t.flags, t.queryN = flags, 0
		return t.open, nil, nil
	case t.open == nil:
		return nil, nil, nil
	case !isGroupEvent(e.Type):
		return nil, nil, fmt.Errorf("binlog archive: %s: group %s has no end before the %v event at offset %d", file, t.open.GTID, e.Type, e.Start)
	case e.Type == replication.XID_EVENT, e.Type == replication.QUERY_EVENT && (t.flags&flagStandalone != 0 || d.Ends(e)):
		g := t.open
		g.End = Position{file, e.End}
		t.state.Add(g.GTID)
		t.open = nil
		return nil, g, nil
	}
	return nil, nil, nil
}
