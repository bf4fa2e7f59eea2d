package clone

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// brokenStream is a connection whose peer is gone: the first read fails.
func brokenStream() *bufConn {
	a, b := net.Pipe()
	b.Close()
	return newBufConn(tls.Client(a, &tls.Config{InsecureSkipVerify: true}))
}

// connectFunc is a connector made of a function.
type connectFunc func(ctx context.Context, session string) (*bufConn, welcome, error)

func (f connectFunc) connect(ctx context.Context, session string) (*bufConn, welcome, error) {
	return f(ctx, session)
}
func (connectFunc) close() {}

// TestStreamBrokenAfterCommit: the donor closes every connection once it has the
// commit's acknowledgement, which can reach it before the stream that carried the
// commit marks the clone committed. A stream breaking then must not redial (the donor
// refuses: the clone is over) and fail a whole clone; it ends, and the clone is
// marked committed. Before the commit, a broken stream redials.
func TestStreamBrokenAfterCommit(t *testing.T) {
	newReceiver := func() (*receiver, *int) {
		ctx, fail := context.WithCancelCause(context.Background())
		t.Cleanup(func() { fail(nil) })
		dials := 0
		r := &receiver{ctx: ctx, fail: fail, log: slog.New(slog.NewTextHandler(io.Discard, nil)), grace: time.Millisecond,
			committed: make(chan struct{}), commitWait: 20 * time.Millisecond, files: map[uint64]*rfile{}, byPath: map[string]*rfile{}}
		r.conns = connectFunc(func(context.Context, string) (*bufConn, welcome, error) {
			dials++
			return nil, welcome{}, remoteError("that clone is over on the donor")
		})
		return r, &dials
	}
	r, dials := newReceiver()
	r.manifest = &manifest.Manifest{} // the commit was applied
	r.run(brokenStream(), "s")
	if *dials != 0 || !r.isCommitted() || context.Cause(r.ctx) != nil {
		t.Fatalf("after the commit: %d redials, committed %v, failure %v", *dials, r.isCommitted(), context.Cause(r.ctx))
	}
	r, dials = newReceiver()
	r.run(brokenStream(), "s")
	if *dials != 1 || r.isCommitted() || context.Cause(r.ctx) == nil {
		t.Fatalf("before the commit: %d redials, committed %v, failure %v", *dials, r.isCommitted(), context.Cause(r.ctx))
	}
}
