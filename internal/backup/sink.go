package backup

import (
	"sync"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// Sink receives a backup that goes neither to a directory, a stream nor a repository:
// a clone's recipient on another host. Like a directory it is rewritable: files may be
// written at any offset by parallel segments, removed and renamed (DDL during the
// backup), and nothing is final before Commit.
type Sink interface {
	// Create starts a file of the backup; sparse asks for holes where pages are zero.
	Create(rel string, sparse bool) (SinkFile, error)
	// Remove forgets a file (a stale copy); a missing file is not an error.
	Remove(rel string) error
	// Rename moves a finished file to a new path.
	Rename(from, to string) error
	// Commit receives the manifest last and makes the backup complete.
	Commit(m *manifest.Manifest) error
}

// SinkFile is one file being written into a Sink; WriteAt may not keep p.
type SinkFile interface {
	WriteAt(p []byte, off int64) error
	// Close ends the file at size.
	Close(size int64) error
}

// sinkStore adapts a Sink to the job's store.
type sinkStore struct{ s Sink }

func (s sinkStore) rewritable() bool { return true }

func (s sinkStore) create(rel string, sparse bool) (storeFile, error) { return s.s.Create(rel, sparse) }

func (s sinkStore) createSmall(rel string) (storeFile, error) { return s.s.Create(rel, false) }

func (s sinkStore) remove(rel string) error { return s.s.Remove(rel) }

func (s sinkStore) rename(from, to string) error { return s.s.Rename(from, to) }

func (s sinkStore) commit(m *manifest.Manifest) error { return s.s.Commit(m) }

// Monitor lets the caller of Run watch the redo copy while the backup runs (the clone's
// throttle backs off before the server's redo log can lap the copier).
type Monitor struct {
	mu       sync.Mutex
	copied   func() uint64
	current  func() (uint64, error)
	capacity uint64
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

func (m *Monitor) set(copied func() uint64, current func() (uint64, error), capacity uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.copied, m.current, m.capacity = copied, current, capacity
	m.mu.Unlock()
}
