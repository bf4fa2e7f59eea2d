package innodb

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// wantCorrupt fails unless err is a *CorruptPageError for pageNo.
func wantCorrupt(t *testing.T, err error, pageNo uint32, what string) {
	t.Helper()
	var ce *CorruptPageError
	if !errors.As(err, &ce) {
		t.Errorf("%s: got %v, want CorruptPageError", what, err)
		return
	}
	if ce.PageNo != pageNo || ce.Reason == "" {
		t.Errorf("%s: got page %d (%q), want page %d", what, ce.PageNo, ce.Reason, pageNo)
	}
}

func TestCheckFixturePagesValid(t *testing.T) {
	for _, f := range fixtures {
		ps, c := checkerFor(t, f.name+".after.gz", f.pageSize, false)
		for i, p := range ps {
			if err := c.Check(p, uint32(i)); err != nil {
				t.Errorf("%s: %v", f.name, err)
			}
		}
		if err := c.Check(load(t, f.name+".before.gz"), f.root()); err != nil {
			t.Errorf("%s before: %v", f.name, err)
		}
	}
}

func TestCheckSystemPagesValid(t *testing.T) {
	ps, c := checkerFor(t, "ibdata1.pages.gz", 16384, true)
	for i, p := range ps {
		if err := c.Check(p, uint32(i)); err != nil {
			t.Error(err)
		}
	}
}

// payloadEnd is the number of bytes of page covered by its checksum.
func payloadEnd(f fixture, page []byte) int {
	if t := PageType(page); f.fullCRC32 && t&fcrc32CompressedBit != 0 {
		return int(t&^fcrc32CompressedBit) << 8
	}
	return len(page)
}

// offsets lists the byte offsets of page whose change must be detected.
func offsets(f fixture, page []byte) []int {
	if f.covered == nil {
		var all []int
		for i := 0; i < payloadEnd(f, page); i++ {
			all = append(all, i)
		}
		return all
	}
	out := make([]int, 0, len(f.covered))
	for _, o := range f.covered {
		if o < 0 {
			o += len(page)
		}
		out = append(out, o)
	}
	return out
}

func TestCheckDetectsFlippedByte(t *testing.T) {
	for _, f := range fixtures {
		ps, c := checkerFor(t, f.name+".after.gz", f.pageSize, false)
		for i, orig := range ps {
			if i == 0 && f.covered != nil && !f.zip && f.pcomp {
				continue // page 0 of a legacy page_compressed space is a normal page
			}
			page := append([]byte(nil), orig...)
			for _, o := range offsets(f, page) {
				page[o] ^= 0x10
				wantCorrupt(t, c.Check(page, uint32(i)), uint32(i), fmt.Sprintf("%s page %d offset %d", f.name, i, o))
				page[o] ^= 0x10
			}
		}
	}
}

func TestCheckWrongPageNumber(t *testing.T) {
	for _, f := range fixtures {
		ps, c := checkerFor(t, f.name+".after.gz", f.pageSize, false)
		wantCorrupt(t, c.Check(ps[3], 4), 4, f.name)
		wantCorrupt(t, c.Check(ps[2], 0), 0, f.name)
	}
}

func TestCheckZeroPage(t *testing.T) {
	for _, f := range fixtures {
		_, c := checkerFor(t, f.name+".after.gz", f.pageSize, false)
		zero := make([]byte, f.pageSize)
		for _, n := range []uint32{0, 1, 7} {
			if err := c.Check(zero, n); err != nil {
				t.Errorf("%s: zero page %d: %v", f.name, n, err)
			}
		}
	}
}

func TestCheckTornPage(t *testing.T) {
	for _, f := range fixtures {
		if !f.tornOK {
			continue
		}
		ps, c := checkerFor(t, f.name+".after.gz", f.pageSize, false)
		after, before := ps[f.root()], load(t, f.name+".before.gz")
		tested := 0
		for cut := 512; cut < f.pageSize; cut += 512 {
			for _, torn := range [][]byte{splice(after, before, cut), splice(before, after, cut)} {
				if bytes.Equal(torn, after) || bytes.Equal(torn, before) {
					continue // both versions agree on one side of the cut
				}
				tested++
				wantCorrupt(t, c.Check(torn, f.root()), f.root(), f.name)
			}
		}
		if tested == 0 {
			t.Errorf("%s: no torn page differs from both versions", f.name)
		}
	}
}

// splice returns a[:cut] followed by b[cut:].
func splice(a, b []byte, cut int) []byte {
	return append(append([]byte(nil), a[:cut]...), b[cut:]...)
}

func TestCheckSystemDoublewriteSkipped(t *testing.T) {
	ps, sys := checkerFor(t, "ibdata1.pages.gz", 16384, true)
	_, ibd := checkerFor(t, "ibdata1.pages.gz", 16384, false)
	junk := append([]byte(nil), ps[4]...) // a valid page 4, checked as page 64..191
	for _, n := range []uint32{64, 100, 191} {
		if err := sys.Check(junk, n); err != nil {
			t.Errorf("doublewrite page %d: %v", n, err)
		}
		wantCorrupt(t, ibd.Check(junk, n), n, "non-system")
	}
	wantCorrupt(t, sys.Check(junk, 192), 192, "after doublewrite")
	wantCorrupt(t, sys.Check(junk, 63), 63, "before doublewrite")
}

func TestCheckWrongSize(t *testing.T) {
	ps, c := checkerFor(t, "fcrc32.after.gz", 16384, false)
	err := c.Check(ps[1][:8192], 1)
	var ce *CorruptPageError
	if err == nil || errors.As(err, &ce) {
		t.Errorf("short page: %v", err)
	}
}

func TestCheckAllocationFree(t *testing.T) {
	for _, f := range fixtures {
		ps, c := checkerFor(t, f.name+".after.gz", f.pageSize, false)
		allocs := testing.AllocsPerRun(20, func() {
			for i, p := range ps {
				_ = c.Check(p, uint32(i))
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per run", f.name, allocs)
		}
	}
}
