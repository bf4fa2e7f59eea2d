package xbstream

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// files returns test content: a multi-chunk file and a small one.
func files() map[string][]byte {
	big := make([]byte, 3<<20+123)
	for i := range big {
		big[i] = byte(i*7 + i>>9)
	}
	return map[string][]byte{"db/big.ibd": big, "small.txt": []byte("hello xbstream\n")}
}

// writeStream interleaves chunks of both files, as parallel writers do.
func writeStream(t *testing.T, fs map[string][]byte) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	big, small := fs["db/big.ibd"], fs["small.txt"]
	for off := 0; off < len(big); off += 1 << 20 {
		if err := w.WritePayload("db/big.ibd", uint64(off), big[off:min(off+1<<20, len(big))]); err != nil {
			t.Fatal(err)
		}
		if off == 0 {
			w.WritePayload("small.txt", 0, small)
			w.WriteEOF("small.txt")
		}
	}
	w.WriteEOF("db/big.ibd")
	return buf.Bytes()
}

func checkDir(t *testing.T, dir string, fs map[string][]byte) {
	t.Helper()
	for name, want := range fs {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, err %v; want %d bytes", name, len(got), err, len(want))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	fs := files()
	dir := t.TempDir()
	names, err := Extract(bytes.NewReader(writeStream(t, fs)), dir)
	if err != nil || len(names) != 2 {
		t.Fatalf("extract: %v %v", names, err)
	}
	checkDir(t, dir, fs)
}

// TestStockMbstreamReadsOurStream: `mbstream -x` unpacks what Writer wrote.
func TestStockMbstreamReadsOurStream(t *testing.T) {
	mb := lookMbstream(t)
	fs := files()
	dir := t.TempDir()
	cmd := exec.Command(mb, "-x", "-C", dir)
	cmd.Stdin = bytes.NewReader(writeStream(t, fs))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mbstream -x: %v\n%s", err, out)
	}
	checkDir(t, dir, fs)
}

// TestWeReadStockMbstream: Extract unpacks what `mbstream -c` wrote.
func TestWeReadStockMbstream(t *testing.T) {
	mb := lookMbstream(t)
	fs := files()
	src := t.TempDir()
	for name, b := range fs {
		os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(src, name), b, 0o644)
	}
	cmd := exec.Command(mb, "-c", "db/big.ibd", "small.txt")
	cmd.Dir = src
	stream, err := cmd.Output()
	if err != nil {
		t.Fatalf("mbstream -c: %v", err)
	}
	dir := t.TempDir()
	if _, err := Extract(bytes.NewReader(stream), dir); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, fs)
}

func TestDamagedStreams(t *testing.T) {
	good := writeStream(t, files())
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x40
	cases := map[string]struct {
		stream []byte
		want   string
	}{
		"flipped byte": {flipped, "checksum mismatch in db/big.ibd"},
		"truncated":    {good[:len(good)-1000], "truncated"},
		"cut at chunk": {good[:len(good)-len(Magic)-2-4-len("db/big.ibd")], "stream ended before the end of db/big.ibd"},
		"garbage":      {[]byte(strings.Repeat("not a stream ", 10)), "no chunk magic"},
		"empty":        {nil, "empty stream"},
	}
	for name, c := range cases {
		_, err := Extract(bytes.NewReader(c.stream), t.TempDir())
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt with %q", name, err, c.want)
		}
	}
}

func TestRefusesPathsOutsideTarget(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.WritePayload("../escape", 0, []byte("x"))
	w.WriteEOF("../escape")
	if _, err := Extract(&buf, t.TempDir()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v", err)
	}
}

func TestNextAtCleanEnd(t *testing.T) {
	r := NewReader(bytes.NewReader(nil))
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("empty reader: %v", err)
	}
}

func lookMbstream(t *testing.T) string { return testdb.Tool(t, "mbstream", "mariadb-backup") }
