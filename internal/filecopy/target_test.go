package filecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/directio"
)

// TestSparseDirectTarget writes data with zero blocks through the O_DIRECT path and
// checks the bytes, the holes and the checksum.
func TestSparseDirectTarget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	c, err := Create(path, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	tg, err := Open(path, true, true)
	if err != nil {
		t.Fatal(err)
	}
	buf := directio.AlignedBuffer(64 << 10)
	for i := range buf[:BlockSize] {
		buf[i] = byte(i)
	}
	copy(buf[60<<10:], "tail")
	if err := tg.WriteAt(buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := tg.Truncate(2 << 20); err != nil {
		t.Fatal(err)
	}
	tg.Close()
	fi, _ := os.Stat(path)
	if fi.Size() != 2<<20 {
		t.Fatalf("size %d", fi.Size())
	}
	if blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512; blocks > 16<<10 {
		t.Fatalf("%d bytes allocated for 8 KiB of data: zero blocks were written", blocks)
	}
	want := make([]byte, 2<<20)
	copy(want[1<<20:], buf)
	got, _ := os.ReadFile(path)
	if checksum.Sum(got) != checksum.Sum(want) {
		t.Fatal("content differs")
	}
	if n, crc, err := FileCRC(path); err != nil || n != 2<<20 || crc != checksum.Sum(want) {
		t.Fatalf("FileCRC = %d %08x %v", n, crc, err)
	}
}

func TestCopyPlainRefusesToOverwriteAndMapsDiskFull(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(src, []byte("hello"), 0o644)
	os.WriteFile(dst, []byte("keep"), 0o644)
	if _, _, err := CopyPlain(context.Background(), src, dst, nil); err == nil {
		t.Fatal("CopyPlain overwrote an existing file")
	}
	if b, _ := os.ReadFile(dst); string(b) != "keep" {
		t.Fatal("existing file changed")
	}
	if !errors.Is(WrapWriteErr(syscall.ENOSPC), ErrDiskFull) || errors.Is(WrapWriteErr(syscall.EIO), ErrDiskFull) {
		t.Fatal("ENOSPC must map to ErrDiskFull, EIO must not")
	}
}

func TestCopyLeavingLeavesTheNamedPages(t *testing.T) {
	const ps = 16 << 10
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := make([]byte, 70*ps+100) // more than one 1 MiB chunk, a partial last page
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	left := map[uint32]bool{2: true, 3: true, 63: true, 64: true, 69: true, 70: true}
	for _, tc := range []struct {
		name string
		size int
		want map[uint32]bool // pages expected as holes
	}{
		{"pages left", ps, left},
		{"page size not 4k-aligned: whole file", 2048, nil},
		{"no leave: whole file", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			var heads int
			leave := func(head []byte) (int, func(uint32) bool) {
				heads++
				if !bytes.Equal(head[:ps], data[:ps]) {
					t.Error("Leave was not given the file's first page")
				}
				return tc.size, func(p uint32) bool { return left[p] }
			}
			n, crc, err := CopyLeaving(context.Background(), src, dst, nil, leave)
			if err != nil {
				t.Fatal(err)
			}
			if _, want, _ := FileCRC(src); n != int64(len(data)) || crc != want {
				t.Fatalf("copied %d bytes CRC %x, want %d and the source's CRC %x: left pages must be read and checksummed", n, crc, len(data), want)
			}
			if heads != 1 {
				t.Fatalf("Leave called %d times, want once", heads)
			}
			got, err := os.ReadFile(dst)
			if err != nil || len(got) != len(data) {
				t.Fatalf("copy is %d bytes (%v), want %d", len(got), err, len(data))
			}
			for p := 0; p*ps < len(data); p++ {
				end := min((p+1)*ps, len(data))
				hole := bytes.Equal(got[p*ps:end], make([]byte, end-p*ps))
				// The partial last page (70) is always written: no later writer fills it.
				if wantHole := tc.want[uint32(p)] && end-p*ps == ps; hole != wantHole {
					t.Errorf("page %d: hole %v, want %v", p, hole, wantHole)
				}
			}
		})
	}
}

// TestCopyAndCRCAtEverySizeEdge copies files whose sizes sit on and beside the block and
// buffer edges (the buffer is sized to the file below 1 MiB): every byte arrives, and
// CopyPlain and FileCRC agree with the CRC of the bytes.
func TestCopyAndCRCAtEverySizeEdge(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 4095, 4096, 4097, 16384, 98304, 1<<20 - 1, 1 << 20, 1<<20 + 1, 3<<20 + 4096} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>12)
		}
		src := filepath.Join(dir, fmt.Sprintf("src-%d", size))
		dst := filepath.Join(dir, fmt.Sprintf("dst-%d", size))
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		n, crc, err := CopyPlain(context.Background(), src, dst, nil)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		want := checksum.Update(0, data)
		if n != int64(size) || crc != want {
			t.Fatalf("size %d: copied %d bytes, crc %08x, want %d and %08x", size, n, crc, size, want)
		}
		if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: copy differs (err %v)", size, err)
		}
		if n, crc, err := FileCRC(src); err != nil || n != int64(size) || crc != want {
			t.Fatalf("size %d: FileCRC %d %08x %v, want %d %08x", size, n, crc, err, size, want)
		}
	}
}

func TestBufferForIsTheFileUpToTheCap(t *testing.T) {
	for _, c := range []struct {
		size int64
		most int
		want int
	}{{0, 1 << 20, 4096}, {98304, 1 << 20, 98304 + 4096}, {1 << 20, 1 << 20, 1 << 20}, {5 << 30, 1 << 20, 1 << 20}, {-1, 1 << 20, 1 << 20}} {
		if got := BufferFor(c.size, c.most); got != c.want {
			t.Errorf("BufferFor(%d, %d) = %d, want %d", c.size, c.most, got, c.want)
		}
	}
}
