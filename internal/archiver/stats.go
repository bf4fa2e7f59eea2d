package archiver

import (
	"sync/atomic"
	"time"
)

// Stats are the archiver's counters, read while it runs (ferry binlog-archive
// --metrics-listen exports them). The zero value is ready; Config.Stats may be nil.
type Stats struct {
	StoredBytes atomic.Int64 // binlog bytes stored (merges not counted again)
	Segments    atomic.Int64 // segments stored
	Reconnects  atomic.Int64 // sessions that ended in a lost connection
	Gaps        atomic.Int64 // gaps recorded by this run
	Connected   atomic.Bool  // a session follows the server's binlog
	// LastStored is when a segment was last stored, LastEventTime the timestamp of
	// the newest event stored (the server's clock, 1 s resolution): both Unix seconds.
	LastStored    atomic.Int64
	LastEventTime atomic.Int64
	tip           atomic.Pointer[Tip]
}

// Tip is where the archive ends: the binlog file and offset the next stored byte
// goes to, and the last complete transaction's GTID stored ("" before the first).
type Tip struct {
	At   string
	GTID string
}

// Tip is where the archive ends, as last stored by this run (nil before).
func (s *Stats) Tip() *Tip { return s.tip.Load() }

func (s *Stats) stored(bytes int64, eventTime uint32, at time.Time, tip Tip) {
	if s == nil {
		return
	}
	s.tip.Store(&tip)
	s.StoredBytes.Add(bytes)
	s.Segments.Add(1)
	s.LastStored.Store(at.Unix())
	if eventTime > 0 {
		s.LastEventTime.Store(int64(eventTime))
	}
}

func (s *Stats) reconnect() {
	if s != nil {
		s.Reconnects.Add(1)
	}
}

func (s *Stats) gap() {
	if s != nil {
		s.Gaps.Add(1)
	}
}

func (s *Stats) connected(on bool) {
	if s != nil {
		s.Connected.Store(on)
	}
}
