package stream

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/ferry-backup/ferry/internal/xbstream"
)

// content returns test files: a large one spanning many blocks, a small one, an empty one.
func content() map[string][]byte {
	big := make([]byte, 9<<20+4097)
	for i := range big {
		big[i] = byte(i/7) ^ byte(i>>13)
	}
	return map[string][]byte{"ibdata1": big, "db/t.frm": []byte("frm bytes\n"), "db/empty.MYD": nil, "db/t2.ibd": big[:3<<20]}
}

type mode struct {
	name string
	comp codec.Compression
	enc  bool
}

var modes = []mode{{"plain", codec.None, false}, {"zstd", codec.Zstd, false}, {"lz4", codec.LZ4, false},
	{"age", codec.None, true}, {"zstd+age", codec.Zstd, true}}

// pack writes files concurrently into a stream, as a backup does.
func pack(t *testing.T, files map[string][]byte, m mode, rcpt []age.Recipient) []byte {
	t.Helper()
	var out bytes.Buffer
	o := Options{Compression: m.comp, Workers: 2, MaxMemory: 64 << 20, BlockSize: 1 << 20, OpenFiles: len(files)}
	if m.enc {
		o.Recipients = rcpt
	}
	w, err := NewWriter(&out, o)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for path, data := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := w.Create(path)
			if err != nil {
				t.Error(err)
				return
			}
			for off := 0; off < len(data); off += 256 << 10 {
				if err := f.WriteAt(data[off:min(off+256<<10, len(data))], int64(off)); err != nil {
					t.Error(err)
					return
				}
			}
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st, _ := w.StoredAs("ibdata1"); st.Name != codec.StoredName("ibdata1", m.comp, m.enc) || st.Size == 0 {
		t.Fatalf("stored info for ibdata1: %+v", st)
	}
	return out.Bytes()
}

func keys(t *testing.T) ([]age.Recipient, []age.Identity) {
	secret, public, err := codec.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := age.ParseX25519Recipient(public)
	id, _ := age.ParseX25519Identity(secret)
	return []age.Recipient{r}, []age.Identity{id}
}

func TestRoundTrip(t *testing.T) {
	files := content()
	rcpt, ids := keys(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := pack(t, files, m, rcpt)
			if m.comp != codec.None && len(s) > len(files["ibdata1"])/2 {
				t.Errorf("compressed stream is %d bytes for %d of data", len(s), len(files["ibdata1"])*4/3)
			}
			if m.enc && bytes.Contains(s, files["db/t.frm"]) {
				t.Error("encrypted stream contains plaintext")
			}
			dir := t.TempDir()
			res, err := Unpack(context.Background(), bytes.NewReader(s), dir, UnpackOptions{Identities: ids, MaxMemory: 8 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for path, data := range files {
				got, err := os.ReadFile(filepath.Join(dir, path))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s: %d bytes back of %d (%v)", path, len(got), len(data), err)
				}
				if sum := res.Files[path]; sum.Size != int64(len(data)) || sum.CRC != checksum.Sum(data) {
					t.Fatalf("%s: sum %+v", path, sum)
				}
			}
		})
	}
}

// TestStockToolsUnpack: mbstream -x unpacks every mode; the stock zstd/lz4 then give the
// original bytes of a compressed file.
func TestStockToolsUnpack(t *testing.T) {
	mb := testdb.Tool(t, "mbstream", "mariadb-backup")
	files := content()
	for _, m := range modes[:3] {
		dir := t.TempDir()
		cmd := exec.Command(mb, "-x", "-C", dir)
		cmd.Stdin = bytes.NewReader(pack(t, files, m, nil))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: mbstream -x: %v: %s", m.name, err, out)
		}
		name := filepath.Join(dir, codec.StoredName("ibdata1", m.comp, false))
		var got []byte
		var err error
		if m.comp == codec.None {
			got, err = os.ReadFile(name)
		} else {
			got, err = exec.Command(testdb.Tool(t, string(m.comp), string(m.comp)), "-d", "-c", name).Output()
		}
		if err != nil || !bytes.Equal(got, files["ibdata1"]) {
			t.Fatalf("%s: stock tools gave %d bytes (%v)", m.name, len(got), err)
		}
	}
}

func TestDamagedStreams(t *testing.T) {
	files := content()
	rcpt, ids := keys(t)
	for _, m := range modes {
		s := pack(t, files, m, rcpt)
		flipped := append([]byte(nil), s...)
		flipped[len(s)/2] ^= 0x01
		cases := []struct {
			name, want string
			b          []byte
		}{
			{"flipped", "checksum mismatch", flipped},
			{"truncated", "truncated", s[:len(s)*2/3]},
			{"garbage", "not an xbstream", []byte(strings.Repeat("this is not a stream ", 100))},
			{"empty", "stream is empty", nil},
		}
		for _, c := range cases {
			_, err := Unpack(context.Background(), bytes.NewReader(c.b), t.TempDir(), UnpackOptions{Identities: ids, MaxMemory: 8 << 20})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s/%s: got %v, want an error saying %q", m.name, c.name, err, c.want)
			}
		}
	}
}

// TestDamageBehindValidCRC: a payload changed and its chunk CRC recomputed (damage
// before the stream was framed) is caught by the frame checksums of zstd and lz4 and by
// age's authentication; a plain file decodes, and its CRC-32C (checked against the
// manifest by restore) differs.
func TestDamageBehindValidCRC(t *testing.T) {
	files := content()
	rcpt, ids := keys(t)
	for _, m := range modes {
		s := reframe(t, pack(t, files, m, rcpt), "ibdata1")
		res, err := Unpack(context.Background(), bytes.NewReader(s), t.TempDir(), UnpackOptions{Identities: ids})
		if m.comp == codec.None && !m.enc {
			if err != nil || res.Files["ibdata1"].CRC == checksum.Sum(files["ibdata1"]) {
				t.Errorf("plain: err %v, CRC-32C unchanged: the damage would go unnoticed", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "ibdata1") {
			t.Errorf("%s: damage behind a valid chunk CRC: %v", m.name, err)
		}
	}
}

// reframe flips one byte in the middle payload of path's chunks and writes the stream
// again with fresh chunk CRCs.
func reframe(t *testing.T, s []byte, path string) []byte {
	var chunks []xbstream.Chunk
	r := xbstream.NewReader(bytes.NewReader(s))
	for {
		c, err := r.Next()
		if err != nil {
			break
		}
		c.Payload = append([]byte(nil), c.Payload...)
		chunks = append(chunks, *c)
	}
	var mine []int
	for i, c := range chunks {
		if p, _, _ := codec.ParseStoredName(c.Path); p == path && c.Type == xbstream.TypePayload {
			mine = append(mine, i)
		}
	}
	c := &chunks[mine[len(mine)/2]]
	c.Payload[len(c.Payload)/2] ^= 0x10
	var out bytes.Buffer
	w := xbstream.NewWriter(&out)
	for _, c := range chunks {
		if c.Type == xbstream.TypeEOF {
			w.WriteEOF(c.Path)
		} else {
			w.WritePayload(c.Path, c.Offset, c.Payload)
		}
	}
	return out.Bytes()
}

func TestWrongOrMissingKey(t *testing.T) {
	rcpt, _ := keys(t)
	_, other := keys(t)
	s := pack(t, content(), mode{"age", codec.Zstd, true}, rcpt)
	for name, ids := range map[string][]age.Identity{"wrong": other, "missing": nil} {
		dir := t.TempDir()
		_, err := Unpack(context.Background(), bytes.NewReader(s), dir, UnpackOptions{Identities: ids})
		want := map[string]string{"wrong": "wrong key", "missing": "pass age identity file"}[name]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s key: %v", name, err)
		}
		if n := countFiles(t, dir); n != 0 {
			t.Errorf("%s key: %d files written", name, n)
		}
	}
}

func countFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func TestMemoryBudgetTooSmall(t *testing.T) {
	_, err := NewWriter(&bytes.Buffer{}, Options{Compression: codec.Zstd, Workers: 2, MaxMemory: 1 << 20, OpenFiles: 4})
	if err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("tiny budget: %v", err)
	}
}

func TestWriteOutOfOrder(t *testing.T) {
	w, _ := NewWriter(&bytes.Buffer{}, Options{Compression: codec.Zstd, Workers: 1, MaxMemory: 64 << 20, OpenFiles: 1})
	f, _ := w.Create("x")
	if err := f.WriteAt([]byte("abc"), 10); err == nil {
		t.Fatal("write at a gap accepted")
	}
}
