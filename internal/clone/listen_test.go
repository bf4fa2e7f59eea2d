package clone

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// TestAcceptLoopBoundsStrangers: the loop hands at most maxStrangers unreleased
// connections to its handler and closes one more at once; a release (called twice
// here) frees exactly one place.
func TestAcceptLoopBoundsStrangers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handled := make(chan func(), maxStrangers+2)
	done := make(chan struct{})
	go func() {
		acceptLoop(ctx, ln, slog.New(slog.DiscardHandler), func(c net.Conn, release func()) { handled <- release })
		close(done)
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var releases []func()
	for range maxStrangers {
		dial()
		releases = append(releases, <-handled)
	}
	extra := dial()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the connection past %d strangers: read %v, want EOF (closed by the loop)", maxStrangers, err)
	}
	releases[0]()
	releases[0]() // a second call frees nothing more
	dial()
	<-handled
	extra = dial()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after one release: read %v, want EOF", err)
	}
	select {
	case <-handled:
		t.Fatal("a connection past the bound reached the handler")
	default:
	}
	cancel()
	ln.Close()
	<-done
}
