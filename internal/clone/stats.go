package clone

import (
	"sync/atomic"
	"time"
)

// ServeStats are a donor's counters, read while ferry serve runs (--metrics-listen
// exports them). The zero value is ready; ServeConfig.Stats may be nil.
type ServeStats struct {
	Started   atomic.Int64 // clones that began to copy
	Succeeded atomic.Int64
	Failed    atomic.Int64
	Active    atomic.Int64 // clones copying now
	BytesSent atomic.Int64 // bytes on the wire of the clones that ended
	// LastSuccess is when a clone last completed (Unix seconds), LastDuration how
	// long it took.
	LastSuccess  atomic.Int64
	LastDuration atomic.Int64 // milliseconds
}

func (s *ServeStats) begin() func(err error, sent int64) {
	if s == nil {
		return func(error, int64) {}
	}
	t0 := time.Now()
	s.Started.Add(1)
	s.Active.Add(1)
	return func(err error, sent int64) {
		s.Active.Add(-1)
		s.BytesSent.Add(sent)
		if err != nil {
			s.Failed.Add(1)
			return
		}
		s.Succeeded.Add(1)
		s.LastSuccess.Store(time.Now().Unix())
		s.LastDuration.Store(time.Since(t0).Milliseconds())
	}
}
