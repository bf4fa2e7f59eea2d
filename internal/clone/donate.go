package clone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
)

// maxDialStreams bounds the connections a dialling donor opens, whatever the
// recipient asks for.
const maxDialStreams = 16

// DonateConfig configures one clone sent to a recipient that listens (a Galera SST
// joiner): the donor dials it, and the recipient still speaks first on every
// connection, so both ends authenticate exactly as with ferry serve.
type DonateConfig struct {
	// To is the recipient's address, host:port.
	To string
	// Serve holds the donor's settings (security, the backup's connection and copy
	// options, rate, impact, memory, reconnect grace, log); Listen, Once and Ready
	// are not used.
	Serve ServeConfig
	// Bypass, if set, sends no copy: the recipient gets this message instead (a
	// Galera donor whose joiner gets the write-sets by IST sends the joiner's position).
	Bypass string
}

// Donate dials the recipient and sends it a hot copy of the server (or only Bypass),
// keeping as many connections as the recipient asked for, redialling broken ones; it
// returns once the recipient has acknowledged the whole copy.
func Donate(ctx context.Context, cfg DonateConfig) error {
	sc := cfg.Serve
	if sc.Memory <= 0 {
		sc.Memory = DefaultMemory
	}
	if sc.Grace <= 0 {
		sc.Grace = DefaultGrace
	}
	if sc.Log == nil {
		sc.Log = slog.New(slog.DiscardHandler)
	}
	sc.Once = true
	host, _, err := net.SplitHostPort(cfg.To)
	if err != nil {
		return fmt.Errorf("recipient address %q: want host:port", cfg.To)
	}
	tcfg, err := sc.Security.clientTLS(host)
	if err != nil {
		return err
	}
	d := &donor{cfg: sc, key: sc.Security.key(), done: make(chan error, 1)}
	dial := func(ctx context.Context) (*bufConn, error) { return d.dialRecipient(ctx, cfg.To, tcfg) }
	if cfg.Bypass != "" {
		return d.bypass(ctx, dial, cfg.Bypass)
	}
	// The server is checked and sized before the recipient is dialled (it waits for the
	// welcome); a donor that cannot use its server still dials, to tell it why.
	d.info, err = probeDonor(ctx, sc.Backup.Conn, sc.Log)
	if err == nil {
		d.est = max(d.estimate(), 1)
	}
	probeErr := err
	bc, err := dialFirst(ctx, sc.Log, dial)
	if err != nil {
		return err
	}
	h, err := d.authenticate(bc)
	if err != nil {
		bc.send(&frame{typ: frameError, payload: []byte(err.Error())})
		bc.c.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return fmt.Errorf("the recipient %s closed the connection instead of saying hello: it did not accept this donor's proof (a different token, or wsrep_sst_auth?)", cfg.To)
		}
		return fmt.Errorf("the recipient %s: %w", cfg.To, err)
	}
	if probeErr != nil {
		refuse(bc, "the donor cannot back up its server: "+probeErr.Error())
		return probeErr
	}
	if _, err := ParseCompress(h.Compress); err != nil || h.Session != "" {
		if err == nil {
			err = fmt.Errorf("the recipient asked to join clone %s, which this donor never started", h.Session)
		}
		refuse(bc, err.Error())
		return fmt.Errorf("the recipient %s: %w", cfg.To, err)
	}
	bc.c.SetDeadline(time.Time{})
	bc.grow()
	d.newClone(ctx, bc, h, cfg.To)
	go d.keepStreams(ctx, dial, min(max(h.Streams, 1), maxDialStreams))
	select {
	case err := <-d.done:
		return err
	case <-ctx.Done():
		d.stopCurrent(context.Cause(ctx))
		return context.Cause(ctx)
	}
}

// dialFirst makes the first connection, retrying for a while: the recipient may be
// busy turning strangers away (at most maxStrangers authenticate at once), or not
// listening yet. A permanent error (a certificate that does not fit, another protocol)
// ends it at once.
func dialFirst(ctx context.Context, log *slog.Logger, dial func(context.Context) (*bufConn, error)) (*bufConn, error) {
	p := dialPolicy()
	p.MaxElapsed = 30 * time.Second
	var bc *bufConn
	err := backoff.Retry(ctx, p, func(ctx context.Context) (err error) {
		bc, err = dial(ctx)
		return err
	}, retryable, func(a backoff.Attempt) {
		log.Warn("connecting to the recipient failed; retrying", "attempt", a.N, "in", a.Wait.Round(time.Millisecond), "err", a.Err)
	})
	return bc, err
}

// dialRecipient opens a TLS connection to a listening recipient and knocks: the side
// that dials proves first that it knows the token, so the recipient, which listens on
// a port anyone may reach, gives strangers nothing to attack offline.
func (d *donor) dialRecipient(ctx context.Context, addr string, tcfg *tls.Config) (*bufConn, error) {
	nd := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to the recipient %s: %w", addr, err)
	}
	tc := tls.Client(c, tcfg)
	tc.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("the recipient %s: %w", addr, explainTLS(err, addr))
	}
	bc := newBufConn(tc)
	var k knock
	if d.key != nil {
		if k.Proof, err = proof(d.key, tc.ConnectionState(), roleKnock); err != nil {
			c.Close()
			return nil, err
		}
	}
	f, err := jsonFrame(k)
	if err == nil {
		err = bc.send(f)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("the recipient %s: %w", addr, err)
	}
	return bc, nil
}

// keepStreams keeps want connections to the recipient while the clone runs: once the
// first one carries data it dials the others, and dials again whenever one breaks.
func (d *donor) keepStreams(ctx context.Context, dial func(context.Context) (*bufConn, error), want int) {
	d.mu.Lock()
	s := d.cur
	d.mu.Unlock()
	if s == nil {
		return
	}
	var pending atomic.Int32 // dialled, not yet counted by the session
	b := backoff.New(dialPolicy())
	wait := dialPolicy().Initial
	started := false // the first connection carries data: the recipient is there
	for s.err() == nil {
		p := int(pending.Load()) // before liveConns: a registration in between then counts twice, never not at all
		live := s.liveConns()
		started = started || live > 0
		if started && live+p < want {
			pending.Add(1)
			bc, err := dial(ctx)
			if err == nil {
				b.Reset()
				wait = dialPolicy().Initial
				go d.joinDialled(bc, s, func() { pending.Add(-1) })
				continue
			}
			pending.Add(-1)
			if !retryable(err) {
				s.log.Warn("dialling another stream to the recipient failed; going on with the streams there are", "err", err)
				return
			}
			wait, _ = b.Next()
			s.log.Warn("dialling another stream to the recipient failed; retrying", "attempt", b.Attempt(), "in", wait.Round(time.Millisecond), "err", err)
		}
		if b.Sleep(s.ctx, wait) != nil {
			return
		}
	}
}

// joinDialled authenticates a connection this donor dialled and adds it to session s;
// registered is called once s counts it, or the connection is given up.
func (d *donor) joinDialled(bc *bufConn, s *session, registered func()) {
	h, err := d.authenticate(bc)
	if err != nil {
		registered()
		s.log.Warn("a dialled stream did not authenticate", "err", err)
		bc.c.Close()
		return
	}
	bc.c.SetDeadline(time.Time{})
	bc.grow()
	d.join(bc, h, bc.c.RemoteAddr().String(), registered)
}

// bypass sends only a welcome carrying msg and waits for the recipient to take it.
func (d *donor) bypass(ctx context.Context, dial func(context.Context) (*bufConn, error), msg string) error {
	bc, err := dial(ctx)
	if err != nil {
		return err
	}
	defer bc.c.Close()
	if _, err := d.authenticate(bc); err != nil {
		bc.send(&frame{typ: frameError, payload: []byte(err.Error())})
		return fmt.Errorf("the recipient: %w", err)
	}
	w := welcome{Session: newSessionID(), Ferry: d.cfg.Backup.Version, Bypass: msg}
	if err := d.sendWelcome(bc, w); err != nil {
		return fmt.Errorf("tell the recipient: %w", err)
	}
	bc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := readFrame(bc.r); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("the recipient did not confirm: %w", err)
	}
	return nil
}
