package repo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/storage"
)

// testFiles are contents shaped like a backup: a big compressible file written in
// parallel segments, a random (incompressible) one, many small ones, an empty one.
func testFiles() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 21<<20+4096)
	for i := range big {
		big[i] = byte(i/13) ^ byte(i>>17)
	}
	noise := make([]byte, 5<<20+333)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	files := map[string][]byte{"ibdata1": big, "db/noise.ibd": noise, "db/empty.MYD": nil}
	for i := range 40 {
		files["db/t"+string(rune('a'+i%26))+string(rune('a'+i/26))+".frm"] = bytes.Repeat([]byte{byte(i)}, 100+i*997)
	}
	return files
}

func newFS(t *testing.T) storage.Storage {
	t.Helper()
	s, err := storage.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeBackup stores files as backup id: big files in 4 segments written at once,
// each segment in 256 KiB writes, as the copy engine does.
func writeBackup(t *testing.T, r *Repo, id string, files map[string][]byte, o WriterOptions) *manifest.Manifest {
	t.Helper()
	w, err := r.NewBackup(context.Background(), id, o)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Format: 1, Type: "full", Storage: manifest.Storage{Format: "repository",
		Compression: string(o.Pipeline.Compression), PartSize: o.PartSize}, EndTime: time.Now()}
	if o.Pipeline.Encrypted() {
		m.Storage.Encryption = "age"
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for path, data := range files {
		f, err := w.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		seg := max(len(data)/4/4096*4096, 4096)
		var fwg sync.WaitGroup
		for off := 0; off < len(data) || off == 0; off += seg {
			end := min(off+seg, len(data))
			fwg.Add(1)
			go func() {
				defer fwg.Done()
				for o := off; o < end; o += 256 << 10 {
					if err := f.WriteAt(data[o:min(o+256<<10, end)], int64(o)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			if len(data) == 0 {
				break
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fwg.Wait()
			if err := f.Close(int64(len(data))); err != nil {
				t.Error(err)
			}
			mu.Lock()
			m.Files = append(m.Files, manifest.File{Path: path, Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data))})
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(m.Files, func(a, b int) bool { return m.Files[a].Path < m.Files[b].Path })
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// readAll restores every file into memory through ReadBackup.
func readAll(t *testing.T, r *Repo, m *manifest.Manifest, ids []age.Identity) (map[string][]byte, error) {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]byte{}
	for _, f := range m.Files {
		out[f.Path] = make([]byte, f.Size)
	}
	err := r.ReadBackup(context.Background(), m, ReadOptions{Identities: ids}, func(f *manifest.File, b *manifest.Blob, rd io.Reader) error {
		mu.Lock()
		dst := out[f.Path][b.RawOffset : b.RawOffset+b.RawSize]
		mu.Unlock()
		_, err := io.ReadFull(rd, dst)
		return err
	})
	return out, err
}

func TestRoundTripEveryEncoding(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	files := testFiles()
	for _, c := range []struct {
		name string
		comp codec.Compression
		enc  bool
	}{{"none", codec.None, false}, {"zstd", codec.Zstd, false}, {"lz4", codec.LZ4, false}, {"zstd+age", codec.Zstd, true}} {
		t.Run(c.name, func(t *testing.T) {
			st := newFS(t)
			r, err := Init(context.Background(), st, "test")
			if err != nil {
				t.Fatal(err)
			}
			o := WriterOptions{Pipeline: pipeline.Options{Compression: c.comp, Workers: 2, OpenFiles: 8}, PartSize: 4 << 20, MaxMemory: 64 << 20}
			var ids []age.Identity
			if c.enc {
				o.Pipeline.Recipients, ids = []age.Recipient{id.Recipient()}, []age.Identity{id}
			}
			m := writeBackup(t, r, "b1", files, o)
			if err := Validate(m); err != nil {
				t.Fatal(err)
			}
			m2, err := r.Resolve(context.Background(), "latest")
			if err != nil || m2.ID != "b1" {
				t.Fatalf("latest: %v %v", m2, err)
			}
			got, err := readAll(t, r, m2, ids)
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range files {
				if !bytes.Equal(got[p], want) {
					t.Errorf("%s differs after the round trip", p)
				}
			}
			// Small files are packed: far fewer objects than files.
			if n := len(m.Objects); n > 16 {
				t.Errorf("%d objects for %d files: small files were not packed", n, len(files))
			}
		})
	}
}

// TestTightMemoryCutsParts: with a budget of three parts, writers cut parts short
// rather than deadlock, and everything still round-trips.
func TestTightMemoryCutsParts(t *testing.T) {
	r, err := Init(context.Background(), newFS(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 2, OpenFiles: 8}, PartSize: 4 << 20, Uploads: 1}
	o.MaxMemory = o.withDefaults().Pipeline.MaxMemory + 3*o.PartSize
	done := make(chan *manifest.Manifest)
	go func() { done <- writeBackup(t, r, "tight", testFiles(), o) }()
	select {
	case m := <-done:
		got, err := readAll(t, r, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range testFiles() {
			if !bytes.Equal(got[p], want) {
				t.Errorf("%s differs", p)
			}
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the writer deadlocked under a tight memory budget")
	}
}

func TestBudgetTooSmallRefused(t *testing.T) {
	o := WriterOptions{Pipeline: pipeline.Options{Workers: 2, OpenFiles: 10}, PartSize: 64 << 20, MaxMemory: 100 << 20}
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("check: %v", err)
	}
}

// TestDamageIsNamed: a flipped byte in a stored object, a truncated object, a missing
// object and a wrong key are each refused, naming the object.
func TestDamageIsNamed(t *testing.T) {
	dir := t.TempDir()
	st, _ := storage.NewFS(dir)
	r, _ := Init(context.Background(), st, "test")
	id, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8, Recipients: []age.Recipient{id.Recipient()}}, PartSize: 4 << 20}
	m := writeBackup(t, r, "d1", testFiles(), o)
	obj := m.Objects[len(m.Objects)/2]
	path := filepath.Join(dir, "backups", "d1", filepath.FromSlash(obj.Key))
	good, _ := os.ReadFile(path)
	damage := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x10
	cases := []struct {
		name string
		data []byte
		ids  []age.Identity
		want string
	}{
		{"flipped byte", flipped, []age.Identity{id}, obj.Key},
		{"truncated", good[:len(good)/3], []age.Identity{id}, obj.Key},
		{"missing", nil, []age.Identity{id}, obj.Key},
		{"wrong key", good, []age.Identity{other}, "wrong key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.data == nil {
				os.Remove(path)
			} else {
				damage(c.data)
			}
			defer damage(good)
			_, err := readAll(t, r, m, c.ids)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one naming %q", err, c.want)
			}
			if c.name != "wrong key" && c.name != "missing" && !errors.Is(err, ErrDamaged) {
				t.Fatalf("err %v is not ErrDamaged", err)
			}
		})
	}
	if _, err := readAll(t, r, m, []age.Identity{id}); err != nil {
		t.Fatalf("restored object no longer reads: %v", err)
	}
}

func TestValidateCatchesManifestDamage(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	m := writeBackup(t, r, "v1", testFiles(), WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8}, PartSize: 4 << 20})
	for i := range m.Files {
		if len(m.Files[i].Blobs) > 1 {
			m.Files[i].CRC32C = "00000000"
			break
		}
	}
	if err := Validate(m); err == nil || !strings.Contains(err.Error(), "combine") {
		t.Fatalf("validate: %v", err)
	}
}

func TestOpenRefusesNewerFormat(t *testing.T) {
	st := newFS(t)
	if _, err := Open(context.Background(), st); !errors.Is(err, ErrNoRepository) {
		t.Fatalf("empty location: %v", err)
	}
	if err := putJSON(context.Background(), st, ConfigKey, Config{Format: FormatVersion + 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), st); err == nil || !strings.Contains(err.Error(), "upgrade ferry") {
		t.Fatalf("newer format: %v", err)
	}
}

// TestListAndExpire: a complete backup is listed complete; one abandoned before its
// manifest is incomplete (its process is gone), never restorable, and removed by
// expire, which keeps the newest complete backups.
func TestListAndExpire(t *testing.T) {
	st := newFS(t)
	r, _ := Init(context.Background(), st, "test")
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8}, PartSize: 4 << 20}
	small := map[string][]byte{"a": []byte("aaa"), "b": bytes.Repeat([]byte("b"), 5<<20)}
	for _, id := range []string{"20260101t000000z-a", "20260102t000000z-b", "20260103t000000z-c"} {
		writeBackup(t, r, id, small, o)
	}
	w, err := r.NewBackup(context.Background(), "20260104t000000z-d", o)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := w.Create("x")
	f.WriteAt(bytes.Repeat([]byte("x"), 6<<20), 0)
	f.Close(6 << 20)
	w.Abort(errors.New("killed"))
	// The marker names this process, which is not ferry: the backup counts as dead.
	list, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.ID+"="+e.Status)
	}
	want := "20260101t000000z-a=complete 20260102t000000z-b=complete 20260103t000000z-c=complete 20260104t000000z-d=incomplete"
	if strings.Join(got, " ") != want {
		t.Fatalf("list: %v\nwant %s", got, want)
	}
	if _, err := r.Manifest(context.Background(), "20260104t000000z-d"); !errors.Is(err, ErrNoBackup) {
		t.Fatalf("incomplete backup has a manifest: %v", err)
	}
	plan, err := r.PlanExpire(context.Background(), Policy{KeepLast: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Expired) != 1 || plan.Expired[0].ID != "20260101t000000z-a" || len(plan.Debris) != 1 || len(plan.Keep) != 2 {
		t.Fatalf("plan: keep %d, expired %v, debris %d", len(plan.Keep), plan.Expired, len(plan.Debris))
	}
	for _, e := range append(plan.Expired, plan.Debris...) {
		if err := r.Delete(context.Background(), e.ID); err != nil {
			t.Fatal(err)
		}
	}
	list, _ = r.List(context.Background())
	if len(list) != 2 || list[0].ID != "20260102t000000z-b" {
		t.Fatalf("after expire: %+v", list)
	}
	if err := (Policy{}).Check(); err == nil {
		t.Fatal("an empty policy was accepted")
	}
}

// slowPuts delays every Put and records the most Puts in flight at once: a fake only
// to make the link the bottleneck on demand.
type slowPuts struct {
	storage.Storage
	delay    time.Duration
	mu       sync.Mutex
	now, max int
}

func (s *slowPuts) Put(ctx context.Context, key string, data io.ReaderAt, size int64, crc uint32) error {
	s.mu.Lock()
	s.now++
	s.max = max(s.max, s.now)
	s.mu.Unlock()
	time.Sleep(s.delay)
	defer func() { s.mu.Lock(); s.now--; s.mu.Unlock() }()
	return s.Storage.Put(ctx, key, data, size, crc)
}

// TestUploadersGrowWithBacklog: when uploads are slower than the copy, objects wait
// and uploaders join, up to the limit; a fast link keeps the initial few.
func TestUploadersGrowWithBacklog(t *testing.T) {
	noise := testFiles()["db/noise.ibd"]
	for _, c := range []struct {
		name        string
		delay       time.Duration
		limit       int
		least, most int
	}{{"slow link", 150 * time.Millisecond, 6, initialUploads + 2, 6}, {"limit of one", 150 * time.Millisecond, 1, 1, 1}} {
		t.Run(c.name, func(t *testing.T) {
			st := &slowPuts{Storage: newFS(t), delay: c.delay}
			r, _ := Init(context.Background(), st, "test")
			o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 2, OpenFiles: 8}, PartSize: 1 << 20, Uploads: c.limit, MaxMemory: 128 << 20}
			writeBackup(t, r, "u", map[string][]byte{"noise": noise}, o)
			if st.max < c.least || st.max > c.most {
				t.Fatalf("at most %d uploads at once, want %d to %d", st.max, c.least, c.most)
			}
		})
	}
}

// countGets counts the objects read.
type countGets struct {
	storage.Storage
	mu   sync.Mutex
	gets map[string]int
}

func (c *countGets) Get(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.Storage.Get(ctx, key, off, n, fn)
}

// TestUnreferencedObjects: a file forgotten after its parts were uploaded (DDL made the
// copy stale) leaves objects no blob references: a restore does not download them, a
// verification still checks them.
func TestUnreferencedObjects(t *testing.T) {
	st := &countGets{Storage: newFS(t), gets: map[string]int{}}
	r, _ := Init(context.Background(), st, "test")
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 2, OpenFiles: 8}, PartSize: 1 << 20}
	w, err := r.NewBackup(context.Background(), "u1", o)
	if err != nil {
		t.Fatal(err)
	}
	noise := testFiles()["db/noise.ibd"]
	for _, name := range []string{"stale.ibd", "kept.ibd"} {
		f, _ := w.Create(name)
		if err := f.WriteAt(noise[:3<<20], 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(3 << 20); err != nil {
			t.Fatal(err)
		}
	}
	w.Remove("stale.ibd")
	m := &manifest.Manifest{Storage: manifest.Storage{Format: "repository"},
		Files: []manifest.File{{Path: "kept.ibd", Size: 3 << 20, CRC32C: checksum.Hex(checksum.Sum(noise[:3<<20]))}}}
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	read := func(all bool) int {
		st.gets = map[string]int{}
		err := r.ReadBackup(context.Background(), m, ReadOptions{Unreferenced: all}, func(_ *manifest.File, _ *manifest.Blob, rd io.Reader) error {
			_, err := io.Copy(io.Discard, rd)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(st.gets)
	}
	if n, all := read(false), read(true); n != 3 || all != 6 {
		t.Fatalf("read %d objects for a restore, %d for a verification; want 3 and 6", n, all)
	}
}

// TestPatchesApplyRoundByRound: pages copied again after a file was closed are stored
// as patches of their round (a large one cut into parts, small ones packed), the
// file's blobs and CRC-32C stay those of the first copy, and reading the blobs and
// then each round's patches in order gives the final bytes, a later round winning
// where two overlap. Validate refuses patches a restore could apply out of order.
func TestPatchesApplyRoundByRound(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 2, OpenFiles: 8}, PartSize: 1 << 20}
	w, err := r.NewBackup(context.Background(), "p1", o)
	if err != nil {
		t.Fatal(err)
	}
	base := append([]byte(nil), testFiles()["db/noise.ibd"][:2<<20]...)
	f, _ := w.Create("t.ibd")
	if err := f.WriteAt(base, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(int64(len(base))); err != nil {
		t.Fatal(err)
	}
	final := append(append([]byte(nil), base...), make([]byte, 16<<10)...) // the last patch extends the file
	patch := func(round int, off int, fill byte, n int) {
		p := bytes.Repeat([]byte{fill}, n)
		if err := w.Patch(round, "t.ibd", int64(off), p); err != nil {
			t.Fatal(err)
		}
		copy(final[off:], p)
	}
	patch(1, 0, 'A', 64<<10)
	patch(1, 512<<10, 'B', 3<<19) // 1.5 MiB: two parts
	patch(1, 2<<20, 'E', 16<<10)  // past the first copy's end
	patch(2, 16<<10, 'C', 16<<10) // over round 1's first patch
	patch(2, 1<<20, 'D', 16<<10)  // over round 1's second
	baseCRC := checksum.Extend(checksum.Sum(base), 16<<10)
	m := &manifest.Manifest{Storage: manifest.Storage{Format: "repository", Compression: "zstd"},
		Files: []manifest.File{{Path: "t.ibd", Size: int64(len(final)), CRC32C: checksum.Hex(baseCRC)}}}
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := Validate(m); err != nil {
		t.Fatal(err)
	}
	if rounds, n := Patched(m); rounds != 2 || n != 64<<10+3<<19+48<<10 {
		t.Fatalf("Patched = %d rounds, %d bytes", rounds, n)
	}
	got := make([]byte, len(final))
	for round := 0; round <= 2; round++ {
		err := r.ReadBackup(context.Background(), m, ReadOptions{Round: round, Parallel: 4}, func(_ *manifest.File, b *manifest.Blob, rd io.Reader) error {
			if b.Round != round {
				t.Errorf("round %d read a blob of round %d", round, b.Round)
			}
			_, err := io.ReadFull(rd, got[b.RawOffset:b.RawOffset+b.RawSize])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, final) {
		t.Fatal("blobs and patches applied round by round do not give the final bytes")
	}
	bad := func(name string, edit func(ps []manifest.Blob)) {
		m2 := *m
		m2.Files = []manifest.File{m.Files[0]}
		m2.Files[0].Patches = append([]manifest.Blob(nil), m.Files[0].Patches...)
		edit(m2.Files[0].Patches)
		if err := Validate(&m2); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	bad("rounds out of order", func(ps []manifest.Blob) { ps[0].Round = 2 })
	bad("overlap within a round", func(ps []manifest.Blob) { ps[1].RawOffset = ps[0].RawOffset })
	bad("past the file", func(ps []manifest.Blob) { ps[len(ps)-1].RawOffset = int64(len(final)) })
}

// TestDrainWaitsForSealedUploads: Drain returns only once every object sealed before
// it is stored (the three-stage copy's round must not queue behind the backlog), while
// a file still open does not hold it.
func TestDrainWaitsForSealedUploads(t *testing.T) {
	st := &slowPuts{Storage: newFS(t), delay: 100 * time.Millisecond}
	r, _ := Init(context.Background(), st, "test")
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 2, OpenFiles: 8}, PartSize: 1 << 20, Uploads: 1, MaxMemory: 64 << 20}
	w, err := r.NewBackup(context.Background(), "d1", o)
	if err != nil {
		t.Fatal(err)
	}
	noise := testFiles()["db/noise.ibd"]
	f, _ := w.Create("t.ibd")
	if err := f.WriteAt(noise[:5<<20], 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(5 << 20); err != nil {
		t.Fatal(err)
	}
	open, _ := w.Create("ib_logfile0") // the redo copy goes on
	if err := open.WriteAt(noise[:4096], 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	stored := len(w.objects)
	w.mu.Unlock()
	if stored != 5 {
		t.Fatalf("Drain returned with %d of the 5 sealed parts uploaded", stored)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f2, _ := w.Create("u.ibd")
	f2.WriteAt(noise[:2<<20], 0)
	f2.Close(2 << 20)
	if err := w.Drain(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with a cancelled context: %v", err)
	}
	w.Abort(errors.New("test over"))
}
