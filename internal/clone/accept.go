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

	mu       sync.Mutex
	session  string // known once the first connection is welcomed
	rejected int    // connections turned away, and why the last was
	lastWhy  error
	ready    chan accepted
	stop     context.CancelFunc
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
	acceptLoop(ctx, a.ln, a.log, func(c net.Conn, release func()) {
		defer release()
		got, err := a.authenticate(ctx, c)
		var rem remoteError
		if errors.As(err, &rem) {
			// The donor refused (wrong secret, its server unreachable): it will not
			// come back, so the transfer fails now, with its reason.
			c.Close()
			got = accepted{err: fmt.Errorf("the donor refused the transfer: %s", string(rem))}
		} else if err != nil {
			a.log.Warn("rejected a connection", "peer", c.RemoteAddr().String(), "err", err)
			a.mu.Lock()
			a.rejected, a.lastWhy = a.rejected+1, err
			a.mu.Unlock()
			c.Close()
			return
		}
		// A connection nobody takes (the donor opened one more than the recipient
		// wants) is closed, so that the donor sends its frames on the others.
		park := time.NewTimer(a.next)
		defer park.Stop()
		select {
		case a.ready <- got:
		case <-ctx.Done():
			got.close()
		case <-park.C:
			a.log.Debug("closed a connection nobody took", "peer", c.RemoteAddr().String())
			got.close()
		}
	})
}

// authenticate runs the TLS handshake as the server, waits for the donor's knock (the
// side that dials proves first: a stranger gets nothing to attack offline), then says
// hello for the current session and checks the donor's welcome. Only what a donor says
// after a valid knock can end the transfer (an error frame: the donor refused).
func (a *acceptor) authenticate(ctx context.Context, c net.Conn) (accepted, error) {
	tc := tls.Server(c, a.tls)
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		return accepted{}, fmt.Errorf("TLS handshake: %w", err)
	}
	bc := newBufConn(tc)
	var k knock
	f, err := readFrameMax(bc.r, maxHandshake)
	if err == nil {
		err = decodeJSON(f, &k)
	}
	if err != nil {
		return accepted{}, fmt.Errorf("no knock from the peer: %v", err) // %v: a stranger's error frame ends nothing
	}
	if a.key != nil && !checkProof(a.key, tc.ConnectionState(), roleKnock, k.Proof) {
		return accepted{}, errors.New("the peer did not prove it knows the shared secret (a different token, or wsrep_sst_auth?)")
	}
	h := a.h
	a.mu.Lock()
	h.Session = a.session
	a.mu.Unlock()
	tc.SetDeadline(time.Now().Add(time.Minute)) // the donor may check its server before it answers
	w, err := exchange(bc, h, a.key)
	if err != nil {
		return accepted{}, err
	}
	tc.SetDeadline(time.Time{})
	bc.grow()
	return accepted{bc: bc, w: w}, nil
}

// close closes an accepted connection, if it is one.
func (got accepted) close() {
	if got.bc != nil {
		got.bc.c.Close()
	}
}

// connect implements connector: the next authenticated connection of session. The
// first waits at most a.first; the others as long as ctx lets them (the recipient waits
// for its further streams while the clone runs, and for a reconnection within its grace).
func (a *acceptor) connect(ctx context.Context, session string) (*bufConn, welcome, error) {
	var first <-chan time.Time
	if session == "" {
		t := time.NewTimer(a.first)
		defer t.Stop()
		first = t.C
	}
	for {
		select {
		case got := <-a.ready:
			if got.err != nil {
				return nil, welcome{}, got.err
			}
			if got.w.Session != session && session != "" {
				got.close() // from another session (a donor that gave up and started over)
				continue
			}
			if session == "" && got.w.Bypass == "" {
				a.mu.Lock()
				a.session = got.w.Session
				a.mu.Unlock()
			}
			return got.bc, got.w, nil
		case <-first:
			return nil, welcome{}, a.turnedAway(fmt.Errorf("no donor connected to %s within %v", a.ln.Addr(), a.first))
		case <-ctx.Done():
			if session != "" {
				return nil, welcome{}, a.turnedAway(fmt.Errorf("the donor did not connect again to %s: %w", a.ln.Addr(), context.Cause(ctx)))
			}
			return nil, welcome{}, a.turnedAway(context.Cause(ctx))
		}
	}
}

// turnedAway adds to err the connections the acceptor rejected meanwhile, if any: a
// donor with another secret is turned away, and the transfer then fails for another
// reason (no donor, the server gave up) that would hide it.
func (a *acceptor) turnedAway(err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rejected == 0 {
		return err
	}
	return fmt.Errorf("%w; meanwhile %d connection(s) to %s were turned away, the last because %v", err, a.rejected, a.ln.Addr(), a.lastWhy)
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
