package directio

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAlignedBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 4096, 4097, 65536, 100000} {
		b := AlignedBuffer(n)
		if len(b) != roundUp(n) || len(b)%Align != 0 || len(b) < n {
			t.Errorf("AlignedBuffer(%d): len %d", n, len(b))
		}
		if len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%Align != 0 {
			t.Errorf("AlignedBuffer(%d) not aligned", n)
		}
	}
}

// writeFile creates dir/name with size random bytes and returns them.
func writeFile(t *testing.T, dir string, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// tempDir returns a fresh directory under base, skipping the test if base is absent.
func tempDir(t *testing.T, base string) string {
	t.Helper()
	if _, err := os.Stat(base); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v (CI must provide it)", base, err)
		}
		t.Skipf("%s: %v", base, err)
	}
	dir, err := os.MkdirTemp(base, "directio-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// testReads checks whole-file, block and past-the-end reads of an odd-sized file.
func testReads(t *testing.T, f *File, data []byte) {
	t.Helper()
	size := len(data)
	if got, err := f.Size(); err != nil || got != int64(size) {
		t.Fatalf("Size = %d, %v; want %d", got, err, size)
	}
	buf := AlignedBuffer(size + 3*Align)
	n, err := f.ReadAt(buf, 0)
	if n != size || !errors.Is(err, io.EOF) || !bytes.Equal(buf[:n], data) {
		t.Errorf("whole file: n=%d err=%v, want %d, EOF", n, err, size)
	}
	blk := AlignedBuffer(Align)
	if n, err := f.ReadAt(blk, Align); n != Align || err != nil || !bytes.Equal(blk, data[Align:2*Align]) {
		t.Errorf("block 1: n=%d err=%v", n, err)
	}
	last := int64(size) &^ (Align - 1)
	if n, err := f.ReadAt(blk, last); n != size-int(last) || !errors.Is(err, io.EOF) || !bytes.Equal(blk[:n], data[last:]) {
		t.Errorf("final block: n=%d err=%v, want %d, EOF", n, err, size-int(last))
	}
	if n, err := f.ReadAt(blk, last+Align); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("past end: n=%d err=%v", n, err)
	}
}

func TestDirectReads(t *testing.T) {
	for _, base := range []string{os.TempDir(), "/var/tmp"} {
		for _, size := range []int{3*Align + 123, 4 * Align, 2*Align + 1} {
			path, data := writeFile(t, tempDir(t, base), size)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if !f.Direct() {
				t.Logf("%s: O_DIRECT not supported, buffered", base)
			}
			testReads(t, f, data)
			if f.Direct() {
				if _, err := f.ReadAt(AlignedBuffer(Align), 100); err == nil {
					t.Error("unaligned offset accepted")
				}
				if _, err := f.ReadAt(make([]byte, 100), 0); err == nil {
					t.Error("unaligned buffer accepted")
				}
			}
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestTmpfs(t *testing.T) {
	path, data := writeFile(t, tempDir(t, "/dev/shm"), 2*Align+7)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Logf("tmpfs direct=%v", f.Direct())
	testReads(t, f, data)
}

func TestBufferedFallback(t *testing.T) {
	openFile = func(path string, flags int, mode uint32) (int, error) {
		if flags&unix.O_DIRECT != 0 {
			return -1, unix.EINVAL
		}
		return unix.Open(path, flags, mode)
	}
	defer func() { openFile = unix.Open }()
	path, data := writeFile(t, t.TempDir(), 5*Align+999)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Direct() {
		t.Fatal("Direct() after fallback")
	}
	testReads(t, f, data)
	b := make([]byte, 10) // buffered reads need no alignment
	if n, err := f.ReadAt(b, 7); n != 10 || err != nil || !bytes.Equal(b, data[7:17]) {
		t.Errorf("unaligned buffered read: %d %v", n, err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	path, _ := writeFile(t, t.TempDir(), 10)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name() != path || f.Fd() == ^uintptr(0) {
		t.Errorf("Name %q Fd %d", f.Name(), f.Fd())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err == nil {
		t.Error("second Close succeeded")
	}
}
