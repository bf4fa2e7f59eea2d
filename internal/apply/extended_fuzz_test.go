package apply

import (
	"bytes"
	"testing"
)

// fuzzBases builds the pages the fuzz test mutates: both row formats at 4 KiB and
// 16 KiB with records, a free record and a split directory, plus an undo page.
func fuzzBases(t testing.TB) ([][]byte, [][]byte) {
	var pages, seeds [][]byte
	for _, size := range []int{4096, 16384} {
		for _, compact := range []bool{false, true} {
			b := basePage(t, size, compact)
			pages = append(pages, b.tp.f)
			seeds = append(seeds, b.heap, b.reuse, b.first, b.del)
		}
	}
	// Real pages and records captured from the server (TestExtendedFixture).
	fx := readFxFile(t, fixturePath("4k"))
	for i, pg := range fx.Pages {
		if i%10 == 0 {
			pages = append(pages, pg.After)
		}
		for j, r := range pg.Recs {
			if w := (recWalker{recs: r.Raw}); j%50 == 0 && w.next() && w.typ == recExtended {
				seeds = append(seeds, w.body)
			}
		}
	}
	undo := make([]byte, 4096)
	copy(undo[offPageNo:], []byte{0, 0, 0, 7})
	undoPageInit(undo)
	pages = append(pages, undo)
	seeds = append(seeds, []byte{extUndoAppend, 1, 2, 3, 4}, []byte{extInitDynamic}, []byte{extInitRedundant}, []byte{extUndoInit})
	return pages, seeds
}

// FuzzApplyExtended applies arbitrary payloads to mutated valid pages: it must never
// panic, and a refused record must leave the frame exactly as it was.
func FuzzApplyExtended(f *testing.F) {
	pages, seeds := fuzzBases(f)
	for i, s := range seeds {
		f.Add(byte(i), []byte{}, s)
		f.Add(byte(i/4), []byte{0, 51, 0x12, 0, 60, 1}, s)
	}
	f.Fuzz(func(t *testing.T, sel byte, muts []byte, payload []byte) {
		frame := append([]byte(nil), pages[int(sel)%len(pages)]...)
		for i := 0; i+3 <= len(muts); i += 3 {
			off := (int(muts[i])<<8 | int(muts[i+1])) % len(frame)
			frame[off] = muts[i+2]
		}
		orig := append([]byte(nil), frame...)
		if err := applyExtended(frame, 7, payload); err != nil && !bytes.Equal(frame, orig) {
			t.Fatalf("%v: frame changed at byte %d", err, firstDiff(frame, orig))
		}
	})
}
