package testdb

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortBelowEphemeralRange: ports are unique, below the kernel's ephemeral range,
// and a port some listener holds is never handed out.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	held, err := pickPort(low)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(held))
	if err != nil {
		t.Fatalf("listen on the port just handed out: %v", err)
	}
	defer l.Close()
	seen := map[int]bool{held: true}
	for range 200 {
		p := freePort(t)
		if p >= low || p < low-portsBelow {
			t.Fatalf("port %d is outside %d-%d", p, low-portsBelow, low-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
