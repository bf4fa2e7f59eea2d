// Package storagetest is the conformance suite every storage backend passes: the same
// tests run against a local directory and a real S3 server.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/storage"
)

// Run runs the suite; open returns a fresh, empty storage each time (no retries: the
// suite checks the backend itself).
func Run(t *testing.T, open func(t *testing.T) storage.Storage) {
	tests := []struct {
		name string
		fn   func(*testing.T, storage.Storage)
	}{
		{"RoundTrip", testRoundTrip},
		{"Ranges", testRanges},
		{"Missing", testMissing},
		{"List", testList},
		{"Delete", testDelete},
		{"Overwrite", testOverwrite},
		{"BadChecksumRefused", testBadChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func put(t *testing.T, s storage.Storage, key string, b []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(b), int64(len(b)), checksum.Sum(b)); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t *testing.T, s storage.Storage, key string, off, n int64) ([]byte, error) {
	t.Helper()
	var got []byte
	err := s.Get(context.Background(), key, off, n, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		got = b
		return err
	})
	return got, err
}

func random(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testRoundTrip(t *testing.T, s storage.Storage) {
	for _, n := range []int{0, 1, 4096, 9<<20 + 17} {
		key := "rt/obj-" + string(rune('a'+n%26))
		want := random(n)
		put(t, s, key, want)
		got, err := get(t, s, key, 0, -1)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: got %d bytes, equal %v, err %v", n, len(got), bytes.Equal(got, want), err)
		}
		oi, err := s.Stat(context.Background(), key)
		if err != nil || oi.Size != int64(n) || oi.Key != key {
			t.Fatalf("stat %s: %+v %v", key, oi, err)
		}
	}
}

func testRanges(t *testing.T, s storage.Storage) {
	b := random(100000)
	put(t, s, "r/x", b)
	for _, c := range []struct{ off, n int64 }{{0, 10}, {5, 1}, {99990, 10}, {1234, 50000}, {70000, -1}, {0, 0}} {
		got, err := get(t, s, "r/x", c.off, c.n)
		end := int64(len(b))
		if c.n >= 0 {
			end = c.off + c.n
		}
		if err != nil || !bytes.Equal(got, b[c.off:end]) {
			t.Fatalf("range %d+%d: %d bytes, err %v", c.off, c.n, len(got), err)
		}
	}
}

func testMissing(t *testing.T, s storage.Storage) {
	if _, err := get(t, s, "no/such", 0, -1); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("get missing: %v, want ErrNotExist", err)
	}
	if _, err := s.Stat(context.Background(), "no/such"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("stat missing: %v, want ErrNotExist", err)
	}
}

func list(t *testing.T, s storage.Storage, prefix string) []string {
	t.Helper()
	var keys []string
	err := s.List(context.Background(), prefix, func(oi storage.ObjectInfo) error {
		keys = append(keys, oi.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return keys
}

func testList(t *testing.T, s storage.Storage) {
	keys := []string{"b/5", "a/2", "a/b/3", "ab/4", "a/1"}
	for _, k := range keys {
		put(t, s, k, []byte(k))
	}
	slices.Sort(keys)
	for prefix, want := range map[string][]string{"": keys, "a/": {"a/1", "a/2", "a/b/3"}, "a": {"a/1", "a/2", "a/b/3", "ab/4"}, "nope/": nil} {
		if got := list(t, s, prefix); !slices.Equal(got, want) {
			t.Errorf("list %q: %v, want %v", prefix, got, want)
		}
	}
	for prefix, want := range map[string][]string{"": {"a", "ab", "b"}, "a/": {"b"}, "b/": nil, "none/": nil} {
		got, err := s.Prefixes(context.Background(), prefix)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("prefixes %q: %v (%v), want %v", prefix, got, err, want)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := s.List(context.Background(), "", func(storage.ObjectInfo) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("list did not stop at fn's error: %v after %d", err, n)
	}
}

func testDelete(t *testing.T, s storage.Storage) {
	put(t, s, "d/x/y", []byte("x"))
	for range 2 {
		if err := s.Delete(context.Background(), "d/x/y"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if _, err := get(t, s, "d/x/y", 0, -1); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("after delete: %v", err)
	}
	if got := list(t, s, "d/"); len(got) != 0 {
		t.Fatalf("list after delete: %v", got)
	}
}

func testOverwrite(t *testing.T, s storage.Storage) {
	put(t, s, "o", []byte("first"))
	put(t, s, "o", []byte("second"))
	if got, _ := get(t, s, "o", 0, -1); string(got) != "second" {
		t.Fatalf("after overwrite: %q", got)
	}
}

func testBadChecksum(t *testing.T, s storage.Storage) {
	b := random(70000)
	err := s.Put(context.Background(), "bad", bytes.NewReader(b), int64(len(b)), checksum.Sum(b)^1)
	if err == nil {
		t.Fatal("a PUT whose bytes do not match its CRC-32C was accepted")
	}
	if _, err := s.Stat(context.Background(), "bad"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("a refused PUT left an object: %v", err)
	}
}
