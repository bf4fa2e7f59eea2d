package codec

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// sample is compressible but not trivial: InnoDB-like pages of repeated records.
func sample(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) ^ byte(i>>14)
	}
	return b
}

// frames compresses data block by block, as the stream writer does.
func frames(t *testing.T, c Compression, data []byte, block int) []byte {
	t.Helper()
	comp, err := NewCompressor(c, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for off := 0; off < len(data); off += block {
		f, err := comp.Compress(nil, data[off:min(off+block, len(data))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f...)
	}
	return out
}

func TestRoundTripConcatenatedFrames(t *testing.T) {
	data := sample(5<<20 + 777)
	for _, c := range []Compression{Zstd, LZ4} {
		z := frames(t, c, data, 1<<20)
		if len(z) >= len(data) {
			t.Errorf("%s: %d bytes compressed to %d", c, len(data), len(z))
		}
		r, err := NewReader(c, bytes.NewReader(z))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: decode: %v", c, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: round trip differs (%d bytes back of %d)", c, len(got), len(data))
		}
	}
}

// TestStockToolsDecode: frames written block by block are what `zstd -d` and `lz4 -d`
// read back, so a DBA can unpack a ferry stream with the stock tools.
func TestStockToolsDecode(t *testing.T) {
	data := sample(3<<20 + 5)
	dir := t.TempDir()
	for _, tc := range []struct {
		c    Compression
		tool string
	}{{Zstd, "zstd"}, {LZ4, "lz4"}} {
		bin := testdb.Tool(t, tc.tool, tc.tool)
		in := filepath.Join(dir, "f"+tc.c.Suffix())
		if err := os.WriteFile(in, frames(t, tc.c, data, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "-d", "-c", in).Output()
		if err != nil {
			t.Fatalf("%s -d: %v", tc.tool, err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("%s -d gave %d bytes, want the %d original", tc.tool, len(out), len(data))
		}
	}
}

func TestCorruptFrameFails(t *testing.T) {
	data := sample(2 << 20)
	for _, c := range []Compression{Zstd, LZ4} {
		z := frames(t, c, data, 1<<20)
		z[len(z)/3] ^= 0x40
		r, err := NewReader(c, bytes.NewReader(z))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err == nil && bytes.Equal(got, data) {
			t.Fatalf("%s: a flipped byte went unnoticed", c)
		}
		if err == nil {
			t.Fatalf("%s: a flipped byte decoded without error to different bytes", c)
		}
	}
}

func TestEncryptDecrypt(t *testing.T) {
	secret, public, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.txt")
	os.WriteFile(keyFile, []byte(secret+"\n"), 0o600)
	rcpts, err := Recipients([]string{public}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ct bytes.Buffer
	w, err := Encrypt(&ct, rcpts)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(strings.Repeat("secret-marker-42 ", 1000))
	w.Write(plain)
	w.Close()
	if bytes.Contains(ct.Bytes(), []byte("secret-marker-42")) {
		t.Fatal("ciphertext contains the plaintext")
	}
	ids, err := Identities(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decrypt(bytes.NewReader(ct.Bytes()), ids)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	if !bytes.Equal(got, plain) {
		t.Fatal("decrypted bytes differ")
	}
	other, _, _ := NewIdentity()
	os.WriteFile(keyFile, []byte(other+"\n"), 0o600)
	ids, _ = Identities(keyFile)
	if _, err := Decrypt(bytes.NewReader(ct.Bytes()), ids); err == nil || !strings.Contains(err.Error(), "wrong key") {
		t.Fatalf("wrong identity: %v", err)
	}
	if _, err := Decrypt(bytes.NewReader(ct.Bytes()), nil); err != ErrNoIdentity {
		t.Fatalf("no identity: %v", err)
	}
	// Key-file mode: the identity file itself gives the recipient.
	os.WriteFile(keyFile, []byte("# public key: "+public+"\n"+secret+"\n"), 0o600)
	fromFile, err := Recipients(nil, []string{keyFile})
	if err != nil || len(fromFile) != 1 {
		t.Fatalf("recipients from an identity file: %v", err)
	}
	ct.Reset()
	w, _ = Encrypt(&ct, fromFile)
	w.Write(plain)
	w.Close()
	ids, _ = Identities(keyFile)
	if _, err := Decrypt(bytes.NewReader(ct.Bytes()), ids); err != nil {
		t.Fatalf("decrypt what was encrypted to an identity file's key: %v", err)
	}
	os.WriteFile(keyFile, []byte("AGE-SECRET-KEY-1NOTAKEY\n"), 0o600)
	if _, err := Recipients(nil, []string{keyFile}); err == nil || strings.Contains(err.Error(), "NOTAKEY") {
		t.Fatalf("bad key file as recipients: %v", err)
	}
	if _, err := Identities(keyFile); err == nil || strings.Contains(err.Error(), "NOTAKEY") {
		t.Fatalf("bad identity file: %v", err)
	}
}

func TestStoredNames(t *testing.T) {
	for _, tc := range []struct {
		rel string
		c   Compression
		enc bool
		out string
	}{{"db/t.ibd", Zstd, true, "db/t.ibd.zst.age"}, {"ib_logfile0", LZ4, false, "ib_logfile0.lz4"}, {"x.frm", None, false, "x.frm"}} {
		if got := StoredName(tc.rel, tc.c, tc.enc); got != tc.out {
			t.Errorf("StoredName = %s, want %s", got, tc.out)
		}
		rel, c, enc := ParseStoredName(tc.out)
		if rel != tc.rel || c != tc.c || enc != tc.enc {
			t.Errorf("ParseStoredName(%s) = %s %s %v", tc.out, rel, c, enc)
		}
	}
}
