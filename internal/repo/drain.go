package repo

import (
	"context"
	"sync"
)

// uploads tracks the objects sealed and not yet uploaded, each by a ticket taken when
// it is sealed, so that Drain can wait for the ones sealed before it.
type uploads struct {
	mu   sync.Mutex
	cond *sync.Cond
	next uint64
	open map[uint64]bool
}

func newUploads() *uploads {
	u := &uploads{open: map[uint64]bool{}}
	u.cond = sync.NewCond(&u.mu)
	return u
}

// start takes the ticket of an object sealed for upload.
func (u *uploads) start() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.next++
	u.open[u.next] = true
	return u.next
}

// done ends a ticket (uploaded, failed or dropped).
func (u *uploads) done(t uint64) {
	u.mu.Lock()
	delete(u.open, t)
	u.mu.Unlock()
	u.cond.Broadcast()
}

// wait returns once every object sealed before the call is done, or ctx ends.
func (u *uploads) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.cond.Broadcast()
	})
	defer stop()
	u.mu.Lock()
	defer u.mu.Unlock()
	upto := u.next
	for ctx.Err() == nil && u.openUpTo(upto) {
		u.cond.Wait()
	}
	return ctx.Err()
}

// openUpTo tells whether a ticket up to upto is still open (u.mu held).
func (u *uploads) openUpTo(upto uint64) bool {
	for t := range u.open {
		if t <= upto {
			return true
		}
	}
	return false
}

// Drain waits until every object sealed so far is uploaded (the three-stage copy's
// rounds then do not queue behind the copy's backlog); the parts of files still open
// are not sealed, so not waited for.
func (w *Writer) Drain(ctx context.Context) error {
	if err := w.ups.wait(ctx); err != nil {
		return err
	}
	return w.Err()
}
