package filecopy

import (
	"context"
	"errors"
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
