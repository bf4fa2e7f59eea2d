package repo

import (
	"context"
	"sync"
)

// budget bounds the encoded bytes held in memory: parts being filled, small blobs
// gathered in a pack, and sealed objects waiting for (or in) their upload. A part
// reserves room before each write, for the worst case of the encoding.
//
// When the budget is used up a writer waits as long as sealed objects are uploading
// (their memory comes back); if nothing is uploading, waiting could last forever (all
// memory in half-filled parts), so a writer cuts its part short and uploads it, and
// a writer with an empty part flushes the pack or seals a part left open between
// writes. Parts thus stay whole while the link is the bottleneck and memory never
// deadlocks.
type budget struct {
	mu     sync.Mutex
	cond   *sync.Cond
	free   int64
	sealed int64 // bytes held by sealed objects until their upload ends
	err    error // set when the backup fails: waiters give up
}

func newBudget(n int64) *budget {
	b := &budget{free: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// reserve takes need() bytes and returns how many. While they are not free and nothing
// is uploading, it calls relieve (unlocked) to seal something, which may change need;
// relieve reports whether it could. It returns the backup's error if the backup fails
// meanwhile.
func (b *budget) reserve(ctx context.Context, need func() int64, relieve func() bool) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < need() {
		if b.err != nil {
			return 0, b.err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if b.sealed == 0 {
			b.mu.Unlock()
			ok := relieve()
			b.mu.Lock()
			if ok {
				continue
			}
		}
		b.cond.Wait()
	}
	n := need()
	b.free -= n
	return n, nil
}

// seal turns reserved bytes into held bytes of a sealed object: reserved were taken,
// size are kept until done(size).
func (b *budget) seal(reserved, size int64) {
	b.mu.Lock()
	b.free += reserved - size
	b.sealed += size
	b.mu.Unlock()
	b.cond.Broadcast()
}

// done gives back the memory of an uploaded object.
func (b *budget) done(size int64) {
	b.mu.Lock()
	b.sealed -= size
	b.free += size
	b.mu.Unlock()
	b.cond.Broadcast()
}

// release gives back reserved bytes that were never sealed.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// fail wakes every waiter with err.
func (b *budget) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}
