package clone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// connector gives the recipient authenticated connections to the donor: a clone dials
// the donor's ferry serve (dialer); a Galera SST joiner listens and the donor dials it
// (acceptor). Either way the recipient says hello first and the donor answers.
type connector interface {
	// connect returns one connection of the clone session ("" for a new clone),
	// authenticated both ways.
	connect(ctx context.Context, session string) (*bufConn, welcome, error)
	// close stops making connections; those handed out stay open.
	close()
}

// close implements connector: a dialer holds nothing.
func (d *dialer) close() {}

// connect implements connector.
func (d *dialer) connect(ctx context.Context, session string) (*bufConn, welcome, error) {
	return d.dial(ctx, session)
}

// acceptor takes the connections a donor makes to this recipient. Each is a TLS
// server handshake, then the same hello and welcome as a dialled one, done as it
// arrives (a stranger's connection holds up nobody; at most maxStrangers at once);
// connect hands out the authenticated ones.
type acceptor struct {
	ln    net.Listener
	tls   *tls.Config
	key   []byte
	h     hello
	log   *slog.Logger
	first time.Duration // how long connect waits for the donor's first connection
	next  time.Duration // and for each later one

	mu      sync.Mutex
	session string // known once the first connection is welcomed
	ready   chan accepted
	stop    context.CancelFunc
}

// accepted is one connection the donor made, authenticated, or what the donor said
// when it refused to go on (err: a remoteError).
type accepted struct {
	bc  *bufConn
	w   welcome
	err error
}

// newAcceptor starts accepting on ln until ctx ends or close is called.
func newAcceptor(ctx context.Context, ln net.Listener, tcfg *tls.Config, key []byte, h hello, first time.Duration, log *slog.Logger) *acceptor {
	ctx, stop := context.WithCancel(ctx)
	a := &acceptor{ln: ln, tls: tcfg, key: key, h: h, log: log, first: first, next: 10 * time.Second,
		ready: make(chan accepted, maxStrangers), stop: stop}
	context.AfterFunc(ctx, func() { ln.Close() })
	go a.accept(ctx)
	return a
}

// close stops accepting; connections handed out stay open.
func (a *acceptor) close() { a.stop() }

func (a *acceptor) accept(ctx context.Context) {
	strangers := make(chan struct{}, maxStrangers)
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				a.log.Error("accept", "err", err)
			}
			return
		}
		select {
		case strangers <- struct{}{}:
		default:
			a.log.Warn("refused a connection: too many connections are authenticating", "peer", c.RemoteAddr().String(), "limit", maxStrangers)
			c.Close()
			continue
		}
		go func() {
			defer func() { <-strangers }()
			got, err := a.authenticate(ctx, c)
			var rem remoteError
			if errors.As(err, &rem) {
				// The donor refused (wrong secret, its server unreachable): it will not
				// come back, so the transfer fails now, with its reason.
				c.Close()
				got = accepted{err: fmt.Errorf("the donor refused the transfer: %s", string(rem))}
			} else if err != nil {
				a.log.Warn("rejected a connection", "peer", c.RemoteAddr().String(), "err", err)
				c.Close()
				return
			}
			select {
			case a.ready <- got:
			case <-ctx.Done():
				got.bc.c.Close()
			}
		}()
	}
}

// authenticate runs the TLS handshake as the server, says hello for the current
// session and checks the donor's welcome.
func (a *acceptor) authenticate(ctx context.Context, c net.Conn) (accepted, error) {
	tc := tls.Server(c, a.tls)
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		return accepted{}, fmt.Errorf("TLS handshake: %w", err)
	}
	h := a.h
	a.mu.Lock()
	h.Session = a.session
	a.mu.Unlock()
	bc := newBufConn(tc)
	w, err := exchange(bc, h, a.key)
	if err != nil {
		return accepted{}, err
	}
	tc.SetDeadline(time.Time{})
	bc.grow()
	return accepted{bc: bc, w: w}, nil
}

// connect implements connector: the next authenticated connection of session.
func (a *acceptor) connect(ctx context.Context, session string) (*bufConn, welcome, error) {
	wait := a.next
	if session == "" {
		wait = a.first
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case got := <-a.ready:
			if got.err != nil {
				return nil, welcome{}, got.err
			}
			if got.w.Session != session && session != "" {
				got.bc.c.Close() // from another session (a donor that gave up and started over)
				continue
			}
			if session == "" && got.w.Bypass == "" {
				a.mu.Lock()
				a.session = got.w.Session
				a.mu.Unlock()
			}
			return got.bc, got.w, nil
		case <-t.C:
			if session == "" {
				return nil, welcome{}, fmt.Errorf("no donor connected to %s within %v", a.ln.Addr(), wait)
			}
			return nil, welcome{}, fmt.Errorf("the donor did not connect again to %s within %v", a.ln.Addr(), wait)
		case <-ctx.Done():
			return nil, welcome{}, context.Cause(ctx)
		}
	}
}

// exchange sends the recipient's hello (with its token proof) on an established TLS
// connection and reads and checks the donor's welcome.
func exchange(bc *bufConn, h hello, key []byte) (welcome, error) {
	var w welcome
	cs := bc.c.ConnectionState()
	if key != nil {
		p, err := proof(key, cs, roleRecipient)
		if err != nil {
			return w, err
		}
		h.Proof = p
	}
	f, err := jsonFrame(h)
	if err == nil {
		err = bc.send(f)
	}
	if err == nil {
		f, err = readFrameMax(bc.r, maxHandshake)
	}
	if err == nil {
		err = decodeJSON(f, &w)
	}
	if err != nil {
		return w, err
	}
	if key != nil && !checkProof(key, cs, roleDonor, w.Proof) {
		return w, errImpostor
	}
	return w, nil
}

// errImpostor is a peer that answered the hello without proving it knows the token.
var errImpostor = errors.New("the peer did not prove it knows the token")
