package clone

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestAcceptorSpeaksOnlyAfterTheKnock: a listening recipient (a Galera joiner) sends
// nothing, and so no proof to attack offline, to a peer that has not proved it knows the
// token first; a stranger's error frame does not end the transfer; a donor whose knock
// is right gets the hello, and the connection is handed out.
func TestAcceptorSpeaksOnlyAfterTheKnock(t *testing.T) {
	sec := Security{Token: []byte("a token of at least sixteen bytes"), Salt: []byte("per-transfer salt")}
	srv, err := sec.serverTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAcceptor(ctx, ln, srv, sec.key(), hello{Protocol: protocolVersion}, 5*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer a.close()
	dialTLS := func() *bufConn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		return newBufConn(tc)
	}
	silent := func(bc *bufConn, what string) {
		t.Helper()
		bc.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if f, err := readFrame(bc.r); err == nil {
			t.Fatalf("%s: the recipient sent a frame (type %d, %q)", what, f.typ, f.payload)
		}
	}
	// A stranger who says nothing, one whose knock is wrong, one that sends an error.
	silent(dialTLS(), "a silent stranger")
	wrong := dialTLS()
	fr, _ := jsonFrame(knock{Proof: strings.Repeat("0", 64)})
	wrong.send(fr)
	silent(wrong, "a wrong knock")
	rude := dialTLS()
	rude.send(&frame{typ: frameError, payload: []byte("give up")})
	silent(rude, "an error frame")

	// The donor: its knock is right, it gets the hello and answers; connect hands it out.
	donor := &donor{key: sec.key(), cfg: ServeConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	done := make(chan error, 1)
	go func() {
		bc, err := donor.dialRecipient(ctx, ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err == nil {
			if _, err = donor.authenticate(bc); err == nil {
				err = donor.sendWelcome(bc, welcome{Session: "s1"})
			}
		}
		done <- err
	}()
	bc, w, err := a.connect(ctx, "")
	if err != nil || w.Session != "s1" {
		t.Fatalf("the donor's connection: %v, %+v", err, w)
	}
	bc.c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
