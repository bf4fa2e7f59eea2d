package clone

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// TestFrameTakenAfterDownIsResent: when a connection's acknowledgement reader fails
// first, down requeues what the connection held; a frame its sender takes from the queue
// just after must go back too. It was kept as sent on the dead connection instead, never
// resent, and the clone waited forever for it (CI: a clone through cut connections hung
// at 79 %).
func TestFrameTakenAfterDownIsResent(t *testing.T) {
	p, _ := newCodecPicker(CompressNone, 1<<20)
	s := newSession(context.Background(), "s", sessionOptions{log: slog.New(slog.NewTextHandler(io.Discard, nil)), memory: 1 << 20,
		codec: p, grace: time.Minute})
	defer s.fail(errors.New("test over"))
	a, b := net.Pipe()
	defer b.Close()
	a.SetDeadline(time.Now().Add(time.Second)) // a write that reaches the pipe fails soon
	c := &conn{s: s, bc: newBufConn(tls.Client(a, &tls.Config{InsecureSkipVerify: true})), sent: map[uint64]*frame{}}
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	c.down(errors.New("the acknowledgements' reader saw EOF"))
	f := &frame{typ: frameData, path: "db/t.ibd", payload: []byte("page")}
	if err := s.enqueue(f); err != nil {
		t.Fatal(err)
	}
	c.sendLoop()
	if got, ok := s.tryNext(); !ok || got != f {
		t.Fatalf("the frame taken by a dead connection is not queued again (got %v)", got)
	}
}
