package clone

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
)

// maxStrangers bounds the connections that have not authenticated yet; one more is
// closed at once, so a flood of them costs neither memory nor goroutines.
const maxStrangers = 16

// acceptLoop accepts connections on ln until it is closed (the caller closes it when
// ctx ends), and handles each in a goroutine of its own. At most maxStrangers are
// handled before they call release (once they are no longer strangers, or gone); one
// more is closed at once, with a warning. release may be called more than once.
func acceptLoop(ctx context.Context, ln net.Listener, log *slog.Logger, handle func(c net.Conn, release func())) {
	strangers := make(chan struct{}, maxStrangers)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				log.Error("accept", "err", err)
			}
			return
		}
		select {
		case strangers <- struct{}{}:
		default:
			log.Warn("refused a connection: too many connections are authenticating", "peer", c.RemoteAddr().String(), "limit", maxStrangers)
			c.Close()
			continue
		}
		var once sync.Once
		go handle(c, func() { once.Do(func() { <-strangers }) })
	}
}
