package clone

import (
	"bufio"
	"bytes"
	"errors"
	"testing"
)

// TestHandshakeFrameBound: before authentication a frame declaring more than a few KiB
// is refused from its header alone, whatever the declared size.
func TestHandshakeFrameBound(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeFrame(w, &frame{typ: frameJSON, payload: make([]byte, maxHandshake+1)}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	head := buf.Bytes()[:headerSize] // the header alone: the payload never arrives
	if _, err := readFrameMax(bufio.NewReader(bytes.NewReader(head)), maxHandshake); !errors.Is(err, errProtocol) {
		t.Fatalf("a %d-byte frame before authentication: %v, want a protocol error", maxHandshake+1, err)
	}
	ok := &frame{typ: frameJSON, payload: []byte(`{"protocol":1}`)}
	buf.Reset()
	writeFrame(w, ok)
	w.Flush()
	if f, err := readFrameMax(bufio.NewReader(&buf), maxHandshake); err != nil || string(f.payload) != string(ok.payload) {
		t.Fatalf("a small hello: %v", err)
	}
}
