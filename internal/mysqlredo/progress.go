package mysqlredo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// stopSignal carries StopAt to Run.
type stopSignal struct {
	lsn  atomic.Uint64
	once *sync.Once
	ch   chan struct{} // closed by set
}

func newStopSignal() stopSignal {
	return stopSignal{once: new(sync.Once), ch: make(chan struct{})}
}

// set records the stop LSN and wakes Run; later calls are ignored.
func (s *stopSignal) set(lsn uint64) {
	s.once.Do(func() {
		s.lsn.Store(lsn)
		close(s.ch)
	})
}

// get returns the stop LSN and whether StopAt was called.
func (s *stopSignal) get() (uint64, bool) {
	select {
	case <-s.ch:
		return s.lsn.Load(), true
	default:
		return 0, false
	}
}

// progress publishes how far Run has copied and how it ended, and lets other
// goroutines wait for it.
type progress struct {
	copied  atomic.Uint64
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	ended   bool
	err     error
	end     uint64
}

// init sets the starting LSN.
func (p *progress) init(lsn uint64) {
	p.copied.Store(lsn)
	p.changed = make(chan struct{})
}

// advance publishes a new copied LSN (never below the current one).
func (p *progress) advance(lsn uint64) {
	if lsn <= p.copied.Load() {
		return
	}
	p.copied.Store(lsn)
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// finish records Run's result (end is E when err is nil).
func (p *progress) finish(end uint64, err error) {
	p.mu.Lock()
	p.ended, p.err, p.end = true, err, end
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// endLSN returns E after a successful Run, else 0.
func (p *progress) endLSN() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ended || p.err != nil {
		return 0
	}
	return p.end
}

// wait blocks until copied >= lsn, Run ended, or ctx is done.
func (p *progress) wait(ctx context.Context, lsn uint64) error {
	for {
		p.mu.Lock()
		ch, ended, err := p.changed, p.ended, p.err
		p.mu.Unlock()
		if c := p.copied.Load(); c >= lsn {
			return nil
		} else if ended && err != nil {
			return err
		} else if ended {
			return fmt.Errorf("redo copy ended at LSN %d, before %d", c, lsn)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for redo copy to reach LSN %d: %w", lsn, ctx.Err())
		}
	}
}
