package testdb

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The ports servers listen on are taken below the kernel's ephemeral range. A port the
// kernel handed out (bind to :0) lies inside that range, so while a server is down for a
// restart the same port can be taken as the local end of any outgoing connection: Galera
// peers redialling the stopped node do exactly that, and one CI run lost n3's gcomm port
// to it ("Address already in use"). Below the range, only another listener can hold it.

// portsBelow is how many ports under the ephemeral range the allocator walks through.
const portsBelow = 12000

// handedOut remembers the ports this test binary gave away, so that a port given to a
// server that is not running yet (a Galera node's IST port) is not given twice. It is
// the harness's one piece of package state: the test binary's ports are one resource.
var handedOut = struct {
	sync.Mutex
	next int
	seen map[int]bool
}{seen: map[int]bool{}}

// freePort returns a TCP port on 127.0.0.1 below the ephemeral range that was free a
// moment ago and that this test binary has not handed out before.
func freePort(t testing.TB) int {
	t.Helper()
	p, err := pickPort(ephemeralLow())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pickPort(low int) (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	first := low - portsBelow
	if handedOut.next == 0 {
		handedOut.next = rand.IntN(portsBelow) // test binaries run side by side start apart
	}
	for range portsBelow {
		p := first + handedOut.next%portsBelow
		handedOut.next++
		if handedOut.seen[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.seen[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free TCP port in %d-%d on 127.0.0.1", first, low-1)
}

// ephemeralLow is the first port of net.ipv4.ip_local_port_range (32768 if unreadable).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= portsBelow+1024 {
		return 32768
	}
	return low
}
