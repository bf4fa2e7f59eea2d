package testdb

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// TCPProxy forwards TCP connections from a loopback port to a target and can cut them
// all at once: a network that drops a clone's streams on demand.
type TCPProxy struct {
	Addr   string // where clients connect
	target string
	ln     net.Listener
	bytes  atomic.Int64
	cuts   atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

// StartTCPProxy listens on 127.0.0.1 and forwards to target until the test ends.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *TCPProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *TCPProxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(c, u)
	go p.copy(u, c)
	p.copy(c, u)
}

func (p *TCPProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = true
	}
}

// copy moves bytes one way, counting them; either side failing closes both.
func (p *TCPProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.bytes.Add(int64(n))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			dst.Close()
			return
		}
	}
}

// Bytes is how many bytes went through, both ways.
func (p *TCPProxy) Bytes() int64 { return p.bytes.Load() }

// Cuts is how many connections Cut closed.
func (p *TCPProxy) Cuts() int64 { return p.cuts.Load() }

// Cut closes every connection open now (both sides), as a network failure would.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		p.cuts.Add(1)
		delete(p.conns, c)
	}
}
