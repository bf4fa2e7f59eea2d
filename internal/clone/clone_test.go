package clone

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestFrameRoundTrip: every field survives the wire, and a damaged header is refused
// instead of allocating what it announces.
func TestFrameRoundTrip(t *testing.T) {
	in := &frame{typ: frameData, flags: flagSparse, codec: codecZstd, seq: 7, handle: 3, off: 1 << 40, rawLen: 5, crc: 0xdeadbeef,
		path: "db/t1.ibd", payload: []byte("hello")}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeFrame(w, in); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	raw := bytes.Clone(buf.Bytes())
	out, err := readFrame(bufio.NewReader(&buf))
	if err != nil {
		t.Fatal(err)
	}
	if out.typ != in.typ || out.flags != in.flags || out.codec != in.codec || out.seq != in.seq || out.handle != in.handle ||
		out.off != in.off || out.rawLen != in.rawLen || out.crc != in.crc || out.path != in.path || string(out.payload) != "hello" {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
	raw[34], raw[35], raw[36], raw[37] = 0xff, 0xff, 0xff, 0x7f // payload length 2 GiB
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(raw))); !errors.Is(err, errProtocol) {
		t.Fatalf("oversized frame: %v, want a protocol error", err)
	}
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(raw[:headerSize+3]))); err == nil {
		t.Fatal("a truncated frame was accepted")
	}
}

// TestCodecs: each codec decodes to the bytes it was given; auto compresses only while
// frames wait for the network.
func TestCodecs(t *testing.T) {
	raw := bytes.Repeat([]byte("ferry clone page "), 60000)
	dec, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{CompressNone, CompressLZ4, CompressZstd} {
		p, err := newCodecPicker(mode, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		c, payload, err := p.encode(raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.decode(&frame{codec: c, rawLen: uint32(len(raw)), payload: payload}, make([]byte, len(raw)))
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%s: decode: %v (equal %v)", mode, err, bytes.Equal(got, raw))
		}
		if mode != CompressNone && len(payload) >= len(raw)/4 {
			t.Fatalf("%s: %d bytes from %d: not compressed", mode, len(payload), len(raw))
		}
	}
	p, _ := newCodecPicker(CompressAuto, 64<<20)
	if c, _, _ := p.encode(raw, 0.01); c != codecNone {
		t.Fatalf("auto compressed with an idle link (codec %d)", c)
	}
	if c, _, _ := p.encode(raw, 0.9); c != codecZstd {
		t.Fatalf("auto did not compress with frames waiting (codec %d)", c)
	}
}

// TestImpostorDonor: a server that does not know the token cannot pass for the donor,
// even if it accepts whatever the recipient sends.
func TestImpostorDonor(t *testing.T) {
	impostor := Security{Token: []byte("some other secret")}
	genuine := Security{Token: []byte("the real secret")}
	stcfg, err := impostor.serverTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", stcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		bc := newBufConn(c.(*tls.Conn))
		if _, err := readFrame(bc.r); err != nil {
			return
		}
		p, _ := proof(impostor.key(), bc.c.ConnectionState(), roleDonor)
		f, _ := jsonFrame(welcome{Session: "x", Proof: p})
		bc.send(f)
	}()
	ctcfg, err := genuine.clientTLS("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	d := &dialer{addr: ln.Addr().String(), tls: ctcfg, key: genuine.key(), h: hello{Protocol: protocolVersion}}
	_, _, err = d.dial(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), "did not prove it knows the token") {
		t.Fatalf("impostor accepted: %v", err)
	}
}

// TestCheckRecipientMalformedDonorVersion: a donor reporting a version that is not
// MariaDB's is refused with a protocol error (it used to index a nil match and panic),
// and a donor of another series is refused naming the series to install.
func TestCheckRecipientMalformedDonorVersion(t *testing.T) {
	cfg := Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, v := range []string{"", "garbage", "10.11"} {
		if err := checkRecipient(context.Background(), cfg, welcome{ServerVersion: v}, nil, t.TempDir()); !errors.Is(err, errProtocol) {
			t.Errorf("donor version %q: %v, want a protocol error", v, err)
		}
	}
	err := checkRecipient(context.Background(), cfg, welcome{ServerVersion: "9.1.2-MariaDB"}, nil, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "install mariadb-server 9.1") {
		t.Errorf("donor of another series: %v", err)
	}
}
