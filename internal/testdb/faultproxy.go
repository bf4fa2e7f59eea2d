package testdb

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// Faults is a schedule of faults a FaultProxy injects, counted over requests.
type Faults struct {
	SlowDownEvery int           // every Nth request is answered 503 SlowDown
	DropEvery     int           // every Nth request's connection is cut mid-response
	Delay         time.Duration // every response waits this long first
	// Rate caps the request bodies (uploads) of all requests together, in bytes per
	// second (0: unlimited): a slow link to the bucket.
	Rate int
	// Only restricts the faults to requests whose path contains it ("" = all).
	Only string
}

// FaultProxy is an HTTP proxy between a client under test and a real S3 server. It
// forwards requests unchanged (signatures stay valid: the Host is kept) and injects the
// faults a real server cannot produce on demand. It only listens on 127.0.0.1.
type FaultProxy struct {
	URL    string
	target string
	ln     net.Listener
	srv    *http.Server
	client *http.Client

	mu      sync.Mutex
	faults  Faults
	limiter *rate.Limiter  // Faults.Rate, nil if unlimited
	n       int            // requests matching the schedule
	stats   map[string]int // "slowdown", "drop", "delay", "requests"
	gets    map[string]int // GETs per path
	puts    map[string]int // PUTs per path the server stored (answered 2xx)
}

// StartFaultProxy proxies to the S3 server at target (http://host:port).
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{URL: "http://" + ln.Addr().String(), target: target, ln: ln, stats: map[string]int{}, gets: map[string]int{}, puts: map[string]int{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
	p.srv = &http.Server{Handler: p}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// Set replaces the fault schedule and restarts its count.
func (p *FaultProxy) Set(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults, p.n = f, 0
	p.limiter = nil
	if f.Rate > 0 {
		p.limiter = rate.NewLimiter(rate.Limit(f.Rate), 64<<10)
	}
}

// Stats returns how many requests went through and how many faults were injected.
func (p *FaultProxy) Stats() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.stats {
		out[k] = v
	}
	return out
}

// GETs returns the number of GET requests per path since the last ResetGETs.
func (p *FaultProxy) GETs() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.gets {
		out[k] = v
	}
	return out
}

// PUTs returns the number of PUT requests per path the server answered with success:
// the objects stored, and how many times each.
func (p *FaultProxy) PUTs() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.puts {
		out[k] = v
	}
	return out
}

// ResetGETs clears the GET counts.
func (p *FaultProxy) ResetGETs() {
	p.mu.Lock()
	p.gets = map[string]int{}
	p.mu.Unlock()
}

// decide picks the fault for one request.
func (p *FaultProxy) decide(r *http.Request) (fault string, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats["requests"]++
	if r.Method == http.MethodGet {
		p.gets[r.URL.Path]++
	}
	f := p.faults
	if f.Only != "" && !strings.Contains(r.URL.Path, f.Only) {
		return "", 0
	}
	p.n++
	switch {
	case f.SlowDownEvery > 0 && p.n%f.SlowDownEvery == 0:
		fault = "slowdown"
	case f.DropEvery > 0 && p.n%f.DropEvery == 0:
		fault = "drop"
	}
	if fault != "" {
		p.stats[fault]++
	}
	if f.Delay > 0 {
		p.stats["delay"]++
	}
	return fault, f.Delay
}

// ServeHTTP forwards one request, or answers it with a fault.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fault, delay := p.decide(r)
	time.Sleep(delay)
	p.mu.Lock()
	if l := p.limiter; l != nil {
		r.Body = &slowBody{r.Body, l, r.Context()}
	}
	p.mu.Unlock()
	if fault == "slowdown" {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		return
	}
	resp, err := p.forward(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if fault == "drop" {
		p.drop(w, resp)
		return
	}
	if r.Method == http.MethodPut && resp.StatusCode/100 == 2 {
		p.mu.Lock()
		p.puts[r.URL.Path]++
		p.mu.Unlock()
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// forward sends the request on to the S3 server, keeping its Host (signed).
func (p *FaultProxy) forward(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	out, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		cancel()
		return nil, err
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host
	out.ContentLength = r.ContentLength
	resp, err := p.client.Do(out)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }

// drop sends the status, headers and part of the body, then cuts the connection: the
// client sees a reset or a short body.
func (p *FaultProxy) drop(w http.ResponseWriter, resp *http.Response) {
	w.WriteHeader(resp.StatusCode)
	io.CopyN(w, resp.Body, 1000)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
		}
	}
}

// slowBody reads a request body no faster than its limiter allows.
type slowBody struct {
	io.ReadCloser
	l   *rate.Limiter
	ctx context.Context
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(p) > b.l.Burst() {
		p = p[:b.l.Burst()]
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if werr := b.l.WaitN(b.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
