package innodb

import "testing"

func benchmarkCheck(b *testing.B, name string, ps int) {
	pages, c := checkerFor(b, name, ps, false)
	p := pages[3]
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Check(p, 3); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckFullCRC32 measures Check on a 16 KiB full_crc32 index page.
func BenchmarkCheckFullCRC32(b *testing.B) { benchmarkCheck(b, "fcrc32.after.gz", 16384) }

// BenchmarkCheckLegacyCRC32 measures Check on a 16 KiB legacy crc32 index page.
func BenchmarkCheckLegacyCRC32(b *testing.B) { benchmarkCheck(b, "crc32.after.gz", 16384) }

// BenchmarkCheckZero measures Check on an all-zero 16 KiB page (allocated, never written).
func BenchmarkCheckZero(b *testing.B) {
	_, c := checkerFor(b, "fcrc32.after.gz", 16384, false)
	p := make([]byte, 16384)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if err := c.Check(p, 9); err != nil {
			b.Fatal(err)
		}
	}
}
