package apply

import (
	"context"
	"errors"
	"sync"
)

// Feed is a redo log still being written, possibly out of order (a clone's frames
// arrive on several connections), as its writer reports it: FollowAhead parses the
// log as its first bytes come in. Its methods are safe for concurrent use.
type Feed struct {
	path string

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever the state below changes
	prefix   int64         // the first prefix bytes are written
	pending  map[int64]int64
	complete bool
	err      error
}

// ErrFeedReplaced is why a Feed ends when its file is removed or begun again before
// it was complete (a clone's donor sending a new log after a re-copy round).
var ErrFeedReplaced = errors.New("the log was replaced while it was being written")

// NewFeed returns the Feed of the log being written to path.
func NewFeed(path string) *Feed {
	return &Feed{path: path, changed: make(chan struct{}), pending: map[int64]int64{}}
}

// Path is the file the log is written to.
func (f *Feed) Path() string { return f.path }

// Wrote reports n bytes written at off (again, harmlessly, if resent).
func (f *Feed) Wrote(off, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.complete || f.err != nil || off+n <= f.prefix {
		return
	}
	if n > f.pending[off] {
		f.pending[off] = n
	}
	advanced := false
	for {
		found := false
		for o, l := range f.pending {
			if o <= f.prefix {
				f.prefix = max(f.prefix, o+l)
				delete(f.pending, o)
				found, advanced = true, true
			}
		}
		if !found {
			break
		}
	}
	if advanced {
		f.notify()
	}
}

// Complete reports the log written whole: size bytes.
func (f *Feed) Complete(size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.complete, f.prefix = true, size
		f.notify()
	}
}

// Fail ends the feed: the log will not be completed as it was begun. A Feed already
// complete stays so.
func (f *Feed) Fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.complete && f.err == nil {
		f.err = err
		f.notify()
	}
}

func (f *Feed) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Wait blocks until the log's first n bytes are written or it is complete, and
// returns how many of its first bytes are written and whether it is complete (then
// that is its size). An error means the log will not be completed as it was begun,
// or ctx ended.
func (f *Feed) Wait(ctx context.Context, n int64) (written int64, complete bool, err error) {
	for {
		f.mu.Lock()
		written, complete, err, changed := f.prefix, f.complete, f.err, f.changed
		f.mu.Unlock()
		if err != nil || complete || written >= n {
			return written, complete, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return written, false, ctx.Err()
		}
	}
}
