package clone

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// The errors a dial meets: a peer that refuses, is not the one meant, or shows a
// certificate that does not fit is final; a refused, reset or cut connection is not.
func TestRetryable(t *testing.T) {
	d := &dialer{addr: "db1:3307"}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", fmt.Errorf("connect to the donor: %w", syscall.ECONNREFUSED), true},
		{"reset", syscall.ECONNRESET, true},
		{"cut handshake", explainTLS(io.ErrUnexpectedEOF, "db1:3307"), true},
		{"timeout", context.DeadlineExceeded, true},
		{"closed during the hello", d.explain(io.EOF), true},
		{"the donor refused", fmt.Errorf("x: %w", remoteError("that clone is over on the donor")), false},
		{"certificate", explainTLS(x509.UnknownAuthorityError{}, "db1:3307"), false},
		{"not TLS", explainTLS(errors.New("tls: first record does not look like a TLS handshake"), "db1:3307"), false},
		{"not the clone protocol", d.explain(fmt.Errorf("bad magic: %w", errProtocol)), false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("%s (%v): retryable %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// The first dial to a recipient retries a transient failure and stops at once on a
// permanent one.
func TestDialFirst(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	calls := 0
	_, err := dialFirst(context.Background(), log, func(context.Context) (*bufConn, error) {
		calls++
		return nil, explainTLS(x509.UnknownAuthorityError{}, "joiner:4444")
	})
	if err == nil || calls != 1 {
		t.Fatalf("a certificate error: %d dials, err %v; want 1", calls, err)
	}
	calls = 0
	start := time.Now()
	bc := brokenStream()
	got, err := dialFirst(context.Background(), log, func(context.Context) (*bufConn, error) {
		if calls++; calls < 2 {
			return nil, syscall.ECONNREFUSED
		}
		return bc, nil
	})
	if err != nil || got != bc || calls != 2 || time.Since(start) > 2*time.Second {
		t.Fatalf("a refused dial: %d dials in %v, err %v", calls, time.Since(start), err)
	}
}
