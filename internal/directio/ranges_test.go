package directio

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const mib = 1 << 20

// sparseFile creates a 10 MiB file with data at [0,4096), [5 MiB, 5 MiB+8192) and in
// its last 100 bytes; the rest are holes.
func sparseFile(t *testing.T, dir string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(10 * mib); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ off, n int64 }{{0, 4096}, {5 * mib, 8192}, {10*mib - 100, 100}} {
		if _, err := f.WriteAt(make([]byte, w.n), w.off); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestDataRangesSparse(t *testing.T) {
	for _, base := range []string{os.TempDir(), "/var/tmp", "/dev/shm"} {
		f := sparseFile(t, tempDir(t, base))
		if _, err := f.Seek(123, 0); err != nil {
			t.Fatal(err)
		}
		got, err := DataRanges(f, 10*mib)
		if err != nil {
			t.Fatal(err)
		}
		want := []Range{{0, 4096}, {5 * mib, 8192}, {10*mib - 4096, 4096}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", base, got, want)
		}
		if pos, _ := f.Seek(0, 1); pos != 123 {
			t.Errorf("%s: file offset %d, want 123", base, pos)
		}
		// A shorter size clips the ranges.
		got, err = DataRanges(f, 5*mib+100)
		if err != nil || !reflect.DeepEqual(got, []Range{{0, 4096}, {5 * mib, 100}}) {
			t.Errorf("%s: clipped: %v %v", base, got, err)
		}
	}
}

func TestDataRangesHoleOnlyAndEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holes")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := dataRangesOf(t, path, 0); err != nil || got != nil {
		t.Errorf("empty: %v %v", got, err)
	}
	if err := os.Truncate(path, 3*mib); err != nil {
		t.Fatal(err)
	}
	if got, err := dataRangesOf(t, path, 3*mib); err != nil || len(got) != 0 {
		t.Errorf("all hole: %v %v", got, err)
	}
}

// dataRangesOf opens path with Open and returns DataRanges of it.
func dataRangesOf(t *testing.T, path string, size int64) ([]Range, error) {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return DataRanges(f, size)
}

func TestDataRangesDenseFile(t *testing.T) {
	path, _ := writeFile(t, t.TempDir(), 3*Align+5)
	got, err := dataRangesOf(t, path, 3*Align+5)
	if err != nil || !reflect.DeepEqual(got, []Range{{0, 3*Align + 5}}) {
		t.Errorf("dense: %v %v", got, err)
	}
}
