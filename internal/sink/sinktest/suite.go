// Package sinktest is the conformance suite every backup end (sink.Sink) passes: the
// same contract, driven by what the end's Caps say it can do, checked by reading the
// stored backup back through the end's own reader.
package sinktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
)

// Stored reads back what an end stored, the way a restore reads it.
type Stored interface {
	// Load returns backup id as the end holds it: its manifest and every file's bytes
	// as a restore gets them (patches stored apart applied). It returns an error when
	// the end holds no restorable backup of that id (nothing committed yet, or the
	// backup was aborted).
	Load(ctx context.Context, id string) (*manifest.Manifest, map[string][]byte, error)
}

// Factory returns a fresh end, not yet open, and the reader of what it stores. It is
// called once per test of the suite.
type Factory func(t *testing.T) (sink.Sink, Stored)

// Run runs the suite on the ends newEnd makes.
func Run(t *testing.T, newEnd Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, sink.Sink, Stored)
	}{
		{"InOrder", testInOrder},
		{"Rewrite", testRewrite},
		{"Patch", testPatch},
		{"Abort", testAbort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, st := newEnd(t)
			tc.fn(t, s, st)
		})
	}
}

// backup is what the suite wrote into an end: the bytes a restore must get back and
// the manifest's entry of each file (its CRC-32C kept as the engine keeps it).
type backup struct {
	id    string
	caps  sink.Caps
	files map[string][]byte
	sums  map[string]manifest.File
	mu    sync.Mutex
}

// open opens s for backup id and keeps its Caps, which must not change from then on
// (checkCaps).
func open(t *testing.T, s sink.Sink, id string) *backup {
	t.Helper()
	if s.Name() == "" {
		t.Error("Name is empty")
	}
	if err := s.Open(context.Background(), id); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &backup{id: id, caps: s.Caps(), files: map[string][]byte{}, sums: map[string]manifest.File{}}
}

// checkCaps fails if the end's Caps changed since Open.
func (b *backup) checkCaps(t *testing.T, s sink.Sink, when string) {
	t.Helper()
	if c := s.Caps(); !reflect.DeepEqual(c, b.caps) {
		t.Errorf("Caps changed %s: %+v, after Open %+v", when, c, b.caps)
	}
}

// write creates rel and writes data through it in order, in writes of step bytes, and
// records it. It may run on its own goroutine: a failure is reported with t.Errorf.
func (b *backup) write(t *testing.T, s sink.Sink, rel string, data []byte, o sink.FileOptions, step int) {
	t.Helper()
	f, err := s.Create(rel, o)
	if err != nil {
		t.Errorf("Create %s: %v", rel, err)
		return
	}
	for off := 0; off < len(data); off += step {
		if err := f.WriteAt(data[off:min(off+step, len(data))], int64(off)); err != nil {
			t.Errorf("write %s at %d: %v", rel, off, err)
			return
		}
	}
	if err := f.Close(int64(len(data))); err != nil {
		t.Errorf("close %s: %v", rel, err)
		return
	}
	b.record(rel, data)
}

// record notes rel as holding data, with its CRC-32C.
func (b *backup) record(rel string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.files[rel] = data
	b.sums[rel] = manifest.File{Path: rel, Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data))}
}

// forget drops rel from what the backup holds.
func (b *backup) forget(rel string) {
	delete(b.files, rel)
	delete(b.sums, rel)
}

// manifest is the manifest the engine would commit for what was written.
func (b *backup) manifest() *manifest.Manifest {
	m := &manifest.Manifest{Format: manifest.FormatVersion, Tool: "ferry", ToolVersion: "sinktest", ID: b.id,
		Type: "full", StartTime: time.Unix(1700000000, 0).UTC(), EndTime: time.Unix(1700000060, 0).UTC(), Storage: b.caps.Storage}
	for _, f := range b.sums {
		m.Files = append(m.Files, f)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	return m
}

// commit checks that nothing is restorable yet, drains and commits, then reads the
// backup back and compares it with what was written.
func (b *backup) commit(t *testing.T, s sink.Sink, st Stored) {
	t.Helper()
	ctx := context.Background()
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if _, _, err := st.Load(ctx, b.id); err == nil {
		t.Fatal("the backup reads back as restorable before Commit")
	}
	m := b.manifest()
	if err := s.Commit(ctx, m); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	b.checkCaps(t, s, "after Commit")
	got, files, err := st.Load(ctx, b.id)
	if err != nil {
		t.Fatalf("read the committed backup back: %v", err)
	}
	b.compare(t, m, got, files)
}

// compare checks the manifest read back against the one committed and every file's
// bytes against what was written.
func (b *backup) compare(t *testing.T, sent, got *manifest.Manifest, files map[string][]byte) {
	t.Helper()
	if got.ID != b.id || got.Type != sent.Type || got.Storage.Format != b.caps.Storage.Format {
		t.Errorf("manifest read back: id %q type %q storage %q; committed %q %q %q", got.ID, got.Type, got.Storage.Format, b.id, sent.Type, b.caps.Storage.Format)
	}
	entries := func(m *manifest.Manifest) []string {
		var s []string
		for _, f := range m.Files {
			s = append(s, fmt.Sprintf("%s %d %s", f.Path, f.Size, f.CRC32C))
		}
		slices.Sort(s)
		return s
	}
	if want, have := entries(sent), entries(got); !slices.Equal(want, have) {
		t.Errorf("manifest read back lists %q, committed %q", have, want)
	}
	for rel, want := range b.files {
		have, ok := files[rel]
		switch {
		case !ok:
			t.Errorf("%s is not in the backup read back", rel)
		case !bytes.Equal(have, want):
			t.Errorf("%s reads back as %d bytes (CRC %08x), written %d (CRC %08x)", rel, len(have), checksum.Sum(have), len(want), checksum.Sum(want))
		}
	}
	for rel := range files {
		if _, ok := b.files[rel]; !ok {
			t.Errorf("%s is in the backup read back, but was removed or never written", rel)
		}
	}
}

// random returns n bytes that do not compress.
func random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// pages returns n bytes that compress, with runs of zero pages.
func pages(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		if (i/16384)%3 != 1 {
			p[i] = byte(i/7) ^ seed
		}
	}
	return p
}

// testInOrder: files of every kind (a metadata file, an empty one, a sparse one with
// zero pages, one larger than a frame, block or part), several written at once as the
// copy does, each in order, read back byte for byte only after Commit, with the
// manifest sent last.
func testInOrder(t *testing.T, s sink.Sink, st Stored) {
	b := open(t, s, "sinktest-inorder")
	var wg sync.WaitGroup
	for _, c := range []struct {
		rel  string
		data []byte
		o    sink.FileOptions
		step int
	}{
		{"backup-my.cnf", []byte("[mysqld]\ninnodb_page_size=16384\n"), sink.FileOptions{Meta: true}, 4096},
		{"db/empty.MYD", nil, sink.FileOptions{}, 4096},
		{"db/t.frm", pages(5000, 3), sink.FileOptions{}, 1000},
		{"db/sparse.ibd", pages(256<<10, 9), sink.FileOptions{Sparse: true, Size: 256 << 10}, 16384},
		{"ibdata1", random(3<<20+4097, 1), sink.FileOptions{Size: 3<<20 + 4097}, 256 << 10},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.write(t, s, c.rel, c.data, c.o, c.step)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	b.write(t, s, "ib_logfile0", pages(64<<10, 1), sink.FileOptions{}, 512)
	b.checkCaps(t, s, "after the files were written")
	b.commit(t, s, st)
}

// testRewrite (Caps().Rewrite): a file written by parallel segments out of order, a
// stale copy removed (twice, and one never written), a copy that vanished part way
// closed at 0 and removed, a finished copy renamed into a new directory, and a file
// removed then copied again under the same path. An end without Caps().Rewrite refuses
// Remove, Rename and a second Create of a file, and what it was sent stays sent.
func testRewrite(t *testing.T, s sink.Sink, st Stored) {
	b := open(t, s, "sinktest-rewrite")
	if !b.caps.Rewrite {
		b.write(t, s, "db/t.frm", pages(5000, 3), sink.FileOptions{}, 1000)
		if err := s.Remove("db/t.frm"); err == nil {
			t.Error("Remove succeeded on an end without Caps().Rewrite: what was sent must stay sent")
		}
		if err := s.Rename("db/t.frm", "db/u.frm"); err == nil {
			t.Error("Rename succeeded on an end without Caps().Rewrite")
		}
		if _, err := s.Create("db/t.frm", sink.FileOptions{}); err == nil {
			t.Error("a file already sent was created again on an end without Caps().Rewrite")
		}
		b.commit(t, s, st)
		return
	}
	data := random(2<<20+3*16384, 2)
	f, err := s.Create("db/seg.ibd", sink.FileOptions{Size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	const segs = 4
	seg := (len(data)/segs + 16383) / 16384 * 16384
	var wg sync.WaitGroup
	for i := segs - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := i * seg; off < min((i+1)*seg, len(data)); off += 64 << 10 {
				end := min(off+64<<10, (i+1)*seg, len(data))
				if err := f.WriteAt(data[off:end], int64(off)); err != nil {
					t.Errorf("segment %d at %d: %v", i, off, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := f.Close(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	b.record("db/seg.ibd", data)
	b.write(t, s, "db/stale.ibd", pages(64<<10, 4), sink.FileOptions{}, 16384)
	b.write(t, s, "db/old.ibd", pages(48<<10, 5), sink.FileOptions{}, 16384)
	b.write(t, s, "db/again.ibd", pages(32<<10, 6), sink.FileOptions{}, 16384)
	vanished, err := s.Create("db/vanished.ibd", sink.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := vanished.WriteAt(random(96<<10, 6), 0); err != nil {
		t.Fatal(err)
	}
	if err := vanished.Close(0); err != nil { // as the copy ends a file DDL dropped
		t.Fatalf("close a file part written at 0: %v", err)
	}
	for _, rel := range []string{"db/stale.ibd", "db/stale.ibd", "db/never.ibd", "db/vanished.ibd"} {
		if err := s.Remove(rel); err != nil {
			t.Fatalf("Remove %s: %v (a missing file is not an error)", rel, err)
		}
	}
	b.forget("db/stale.ibd")
	if err := s.Rename("db/old.ibd", "db2/new.ibd"); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	b.record("db2/new.ibd", b.files["db/old.ibd"])
	b.forget("db/old.ibd")
	if err := s.Remove("db/again.ibd"); err != nil {
		t.Fatal(err)
	}
	b.forget("db/again.ibd")
	b.write(t, s, "db/again.ibd", pages(40<<10, 7), sink.FileOptions{}, 16384)
	b.commit(t, s, st)
}

// testPatch (Caps().Patch): pages of closed files rewritten over two rounds, Drain
// before each round as the three-stage copy does: over old bytes, zeros over old bytes
// of a sparse file, across the old end and past it (the file grows, zeros in between),
// more than a frame, block or part at once, under the new name of a renamed file (with
// Caps().Rewrite), and a later round over part of an earlier one (the later wins). In place, Patch returns the
// CRC-32C of the bytes it replaced (zeros past the old end) and the file's checksum is
// kept from it; stored apart, it returns 0 and the file's checksum stays that of the
// first copy, extended with zeros. An end without Caps().Patch refuses with
// sink.ErrNoPatch and leaves the file as it was sent.
func testPatch(t *testing.T, s sink.Sink, st Stored) {
	b := open(t, s, "sinktest-patch")
	const page = 16384
	if !b.caps.Patch {
		b.write(t, s, "db/p.ibd", random(2*page, 3), sink.FileOptions{}, page)
		if _, err := s.Patch(1, "db/p.ibd", 0, make([]byte, page)); !errors.Is(err, sink.ErrNoPatch) {
			t.Errorf("Patch on an end without Caps().Patch: %v, want sink.ErrNoPatch", err)
		}
		b.commit(t, s, st)
		return
	}
	b.write(t, s, "db/p.ibd", random(8*page+1000, 3), sink.FileOptions{}, 4*page)
	b.write(t, s, "db/sparse.ibd", pages(6*page, 8), sink.FileOptions{Sparse: true}, page)
	b.write(t, s, "db/untouched.ibd", pages(2*page, 9), sink.FileOptions{}, page)
	b.write(t, s, "db/big.ibd", random(2<<20+page, 5), sink.FileOptions{}, 256<<10)
	moved := "db/p.ibd" // patched under its new name where the end can rename
	if b.caps.Rewrite {
		b.write(t, s, "db/moved.ibd", pages(4*page, 10), sink.FileOptions{}, page)
		if err := s.Rename("db/moved.ibd", "db2/moved.ibd"); err != nil {
			t.Fatalf("Rename: %v", err)
		}
		moved = "db2/moved.ibd"
		b.record(moved, b.files["db/moved.ibd"])
		b.forget("db/moved.ibd")
	}
	type patch struct {
		round int
		rel   string
		off   int
		p     []byte
	}
	for _, round := range [][]patch{{
		{1, "db/p.ibd", 0, bytes.Repeat([]byte{'A'}, 2*page)},
		{1, "db/p.ibd", 4 * page, bytes.Repeat([]byte{'B'}, page)},
		{1, "db/p.ibd", 8 * page, bytes.Repeat([]byte{'E'}, 2*page)}, // across the old end
		{1, "db/sparse.ibd", 0, make([]byte, 2*page)},                // zeros over old bytes
		{1, "db/sparse.ibd", 3 * page, bytes.Repeat([]byte{'S'}, page)},
		{1, "db/big.ibd", page, bytes.Repeat([]byte{'L'}, 3<<19)}, // more than a frame, block or part
		{1, moved, 2 * page, bytes.Repeat([]byte{'M'}, page)},
	}, {
		{2, "db/p.ibd", page, bytes.Repeat([]byte{'C'}, 2*page)}, // over half of round 1's first
		{2, "db/p.ibd", 12 * page, bytes.Repeat([]byte{'G'}, page)},
		{2, "db/sparse.ibd", 3 * page, make([]byte, page)},
		{2, "db/big.ibd", 1 << 20, bytes.Repeat([]byte{'N'}, 4*page)},
		{2, moved, 2 * page, bytes.Repeat([]byte{'O'}, 2*page)},
	}} {
		if err := s.Drain(context.Background()); err != nil {
			t.Fatalf("Drain before round %d: %v", round[0].round, err)
		}
		for _, pt := range round {
			b.patch(t, s, pt.round, pt.rel, pt.off, pt.p)
		}
	}
	b.commit(t, s, st)
}

// patch rewrites p at off of rel through s and keeps the expected bytes and the
// file's manifest entry as the engine does (backup's job.patch).
func (b *backup) patch(t *testing.T, s sink.Sink, round int, rel string, off int, p []byte) {
	t.Helper()
	cur := b.files[rel]
	end := off + len(p)
	replaced := make([]byte, len(p)) // zeros past the old end
	if off < len(cur) {
		copy(replaced, cur[off:])
	}
	old, err := s.Patch(round, rel, int64(off), p)
	if err != nil {
		t.Fatalf("Patch round %d %s at %d: %v", round, rel, off, err)
	}
	sum := b.sums[rel]
	crc, _ := parseHex(sum.CRC32C)
	if int64(end) > sum.Size {
		crc, sum.Size = checksum.Extend(crc, int64(end)-sum.Size), int64(end)
	}
	if b.caps.PatchApart {
		if old != 0 {
			t.Errorf("Patch of %s at %d returned %08x on an end that stores patches apart, want 0", rel, off, old)
		}
	} else {
		if want := checksum.Sum(replaced); old != want {
			t.Errorf("Patch of %s at %d returned %08x, the CRC-32C of the bytes it replaced is %08x", rel, off, old, want)
		}
		crc = checksum.Replace(crc, sum.Size, int64(off), int64(len(p)), old, checksum.Sum(p))
	}
	sum.CRC32C = checksum.Hex(crc)
	b.sums[rel] = sum
	next := make([]byte, max(len(cur), end))
	copy(next, cur)
	copy(next[off:], p)
	b.files[rel] = next
	if !b.caps.PatchApart && sum.CRC32C != checksum.Hex(checksum.Sum(next)) {
		t.Errorf("%s: the CRC-32C kept from Patch's result is %s, the file's is %08x", rel, sum.CRC32C, checksum.Sum(next))
	}
}

func parseHex(s string) (uint32, error) {
	var v uint32
	_, err := fmt.Sscanf(s, "%08x", &v)
	return v, err
}

// testAbort: a backup given up part way (a file closed, another still open) leaves
// nothing a restore would take, and Abort says how the partial backup is left.
func testAbort(t *testing.T, s sink.Sink, st Stored) {
	b := open(t, s, "sinktest-abort")
	b.write(t, s, "ibdata1", random(1<<20+5, 4), sink.FileOptions{}, 256<<10)
	f, err := s.Create("db/half.ibd", sink.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt(pages(32<<10, 2), 0); err != nil {
		t.Fatal(err)
	}
	msg := s.Abort(errors.New("sinktest: the copy failed"))
	if msg == "" {
		t.Error("Abort returned no message on how the partial backup is left")
	}
	if _, _, err := st.Load(context.Background(), b.id); err == nil {
		t.Error("an aborted backup reads back as restorable")
	}
}
