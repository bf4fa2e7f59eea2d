package checksum

import (
	"math/rand/v2"
	"testing"
)

func TestCombineMatchesWholeChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for _, cut := range []int{0, 1, 7, 4096, 65537, len(buf) - 1, len(buf)} {
		a, b := buf[:cut], buf[cut:]
		got := Combine(Sum(a), Sum(b), int64(len(b)))
		if want := Sum(buf); got != want {
			t.Fatalf("cut %d: Combine = %08x, want %08x", cut, got, want)
		}
	}
}

func TestCombineThreeParts(t *testing.T) {
	p := [][]byte{[]byte("hello, "), make([]byte, 100000), []byte("world")}
	c := Sum(p[0])
	for _, x := range p[1:] {
		c = Combine(c, Sum(x), int64(len(x)))
	}
	whole := append(append(append([]byte{}, p[0]...), p[1]...), p[2]...)
	if c != Sum(whole) {
		t.Fatalf("three-part combine %08x != %08x", c, Sum(whole))
	}
}

func TestZeros(t *testing.T) {
	for _, n := range []int64{0, 1, 2, 3, 4095, 4096, 1<<20 + 7} {
		if got, want := Zeros(n), Sum(make([]byte, n)); got != want {
			t.Errorf("Zeros(%d) = %08x, want %08x", n, got, want)
		}
	}
}

// TestReplaceAndExtend: a file's CRC-32C kept up to date through page rewrites and
// growth equals the CRC-32C of the final bytes.
func TestReplaceAndExtend(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	crc, size := Sum(buf), int64(len(buf))
	for _, w := range []struct{ off, n int64 }{{0, 4096}, {16384, 16384}, {65535, 1}, {61440, 4096}, {70000, 5000}, {100000, 4096}} {
		page := make([]byte, w.n)
		for i := range page {
			page[i] = byte(r.Uint32())
		}
		if end := w.off + w.n; end > size {
			crc = Extend(crc, end-size)
			buf = append(buf, make([]byte, end-size)...)
			size = end
		}
		old := Sum(buf[w.off : w.off+w.n])
		copy(buf[w.off:], page)
		crc = Replace(crc, size, w.off, w.n, old, Sum(page))
		if want := Sum(buf); crc != want {
			t.Fatalf("after writing %d bytes at %d: %08x, want %08x", w.n, w.off, crc, want)
		}
	}
}
