package keyfile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

const plain = "# keys\n1;a7addd9adea9978fda19f21e6be987880e68ac92632ca052e5bb42b1a506939a\n\n2;00112233445566778899aabbccddeeff  # AES-128\n"

func TestParsePlain(t *testing.T) {
	k, err := Parse([]byte(plain), "")
	if err != nil {
		t.Fatal(err)
	}
	if key, err := k.Key(1, 1); err != nil || len(key) != 32 || key[0] != 0xa7 {
		t.Errorf("key 1 = %x, %v", key, err)
	}
	if key, err := k.Key(2, 1); err != nil || len(key) != 16 || key[15] != 0xff {
		t.Errorf("key 2 = %x, %v", key, err)
	}
	if _, err := k.Key(3, 1); err == nil {
		t.Error("key 3 exists")
	}
	if _, err := k.Key(1, 2); err == nil {
		t.Error("key 1 version 2 exists")
	}
}

func TestParseRefuses(t *testing.T) {
	for _, bad := range []string{
		"2;00112233445566778899aabbccddeeff\n", // no key 1
		"1;0011\n",                             // short key
		"1;zz112233445566778899aabbccddeeff\n", // not hex
		"1 00112233445566778899aabbccddeeff\n", // no ;
		"0;00112233445566778899aabbccddeeff\n", // id 0
		"1;00112233445566778899aabbccddeeff\n1;00112233445566778899aabbccddeeff\n", // twice
		"Salted__12345678" + strings.Repeat("x", 16),                               // encrypted, no password
	} {
		if _, err := Parse([]byte(bad), ""); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

// TestEncryptedWithOpenSSL reads a key file encrypted the way MariaDB documents,
// `openssl enc -aes-256-cbc -md sha1`, with the password from a file as
// file_key_management_filekey=FILE:path gives it (trailing newline removed); a wrong
// password is an error that says so.
func TestEncryptedWithOpenSSL(t *testing.T) {
	openssl := testdb.Tool(t, "openssl", "openssl")
	dir := t.TempDir()
	in, enc, pw := filepath.Join(dir, "keys.txt"), filepath.Join(dir, "keys.enc"), filepath.Join(dir, "pw")
	os.WriteFile(in, []byte(plain), 0o600)
	os.WriteFile(pw, []byte("secret words\n"), 0o600)
	if out, err := exec.Command(openssl, "enc", "-aes-256-cbc", "-md", "sha1", "-pass", "pass:secret words", "-in", in, "-out", enc).CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	secret, err := Secret("FILE:" + pw)
	if err != nil || secret != "secret words" {
		t.Fatalf("Secret = %q, %v", secret, err)
	}
	k, err := Files{KeyFile: enc, PasswordFile: pw}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if key, _ := k.Key(2, 1); !bytes.Equal(key, []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}) {
		t.Errorf("key 2 = %x", key)
	}
	if _, err := Load(enc, "wrong"); err == nil || !strings.Contains(err.Error(), "password") {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := Load(enc, ""); err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Errorf("no password: %v", err)
	}
}
