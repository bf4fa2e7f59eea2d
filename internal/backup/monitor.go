package backup

import "sync"

// Monitor lets the caller of Run watch the redo copy while the backup runs (the clone's
// throttle backs off before the server's redo log can lap the copier).
type Monitor struct {
	mu       sync.Mutex
	copied   func() uint64
	current  func() (uint64, error)
	capacity uint64
	start    uint64 // the first redo copy's start LSN
}

// StartLSN is the checkpoint LSN where the backup's first redo copy began (0 before
// it began): every page the copy reads is its version at some moment after it, so an
// interrupted copy can be completed by an incremental from it.
func (m *Monitor) StartLSN() uint64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.start
}

// RedoLag returns how many bytes of redo the server wrote that the copier has not yet
// read, and the circular log's capacity; ok is false before the copy starts.
func (m *Monitor) RedoLag() (lag, capacity uint64, ok bool) {
	m.mu.Lock()
	copied, current, capacity := m.copied, m.current, m.capacity
	m.mu.Unlock()
	if copied == nil {
		return 0, 0, false
	}
	cur, err := current()
	if err != nil {
		return 0, 0, false
	}
	done := copied()
	if cur <= done {
		return 0, capacity, true
	}
	return cur - done, capacity, true
}

func (m *Monitor) set(copied func() uint64, current func() (uint64, error), capacity, start uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.copied, m.current, m.capacity = copied, current, capacity
	if m.start == 0 {
		m.start = start
	}
	m.mu.Unlock()
}
