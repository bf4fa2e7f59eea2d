package signing

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeysSignAndVerify(t *testing.T) {
	secret, public, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "sign.key")
	os.WriteFile(keyFile, []byte("# public key: "+public+"\n"+secret+"\n"), 0o600)
	priv, err := LoadSecret(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublic(public)
	if err != nil {
		t.Fatal(err)
	}
	if fromFile, err := LoadPublic(keyFile); err != nil || !fromFile.Equal(pub) {
		t.Fatalf("LoadPublic(key file) = %v, %v", fromFile, err)
	}
	if PublicString(pub) != public {
		t.Fatalf("PublicString = %s, want %s", PublicString(pub), public)
	}
	msg := []byte(`{"id":"b1"}`)
	sig := Sign(priv, msg)
	if err := Verify(pub, msg, sig); err != nil {
		t.Fatal(err)
	}
	_, otherPublic, _ := NewKey()
	other, _ := ParsePublic(otherPublic)
	for name, c := range map[string]struct {
		pub ed25519.PublicKey
		msg []byte
		sig *Signature
	}{
		"changed":   {pub, []byte(`{"id":"b2"}`), sig},
		"unsigned":  {pub, msg, nil},
		"other key": {other, msg, sig},
		"garbage":   {pub, msg, &Signature{Algorithm: Algorithm, KeyID: sig.KeyID, Value: "!!"}},
		"algorithm": {pub, msg, &Signature{Algorithm: "rsa", KeyID: sig.KeyID, Value: sig.Value}},
	} {
		if err := Verify(c.pub, c.msg, c.sig); !errors.Is(err, ErrUntrusted) {
			t.Errorf("%s: Verify = %v, want ErrUntrusted", name, err)
		}
	}
}

func TestMalformedKeys(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"", "age1abc", "ferrysign1", "ferrysign1!!!", "ferrysign1" + strings.Repeat("A", 50)} {
		if _, err := ParsePublic(s); err == nil {
			t.Errorf("ParsePublic(%q) accepted", s)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("# nothing\n"), 0o600)
	damaged := filepath.Join(dir, "damaged")
	os.WriteFile(damaged, []byte(secretPrefix+"AAAA\n"), 0o600)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, maxKeyFile+1), 0o600)
	for _, f := range []string{empty, damaged, big, filepath.Join(dir, "missing")} {
		if _, err := LoadSecret(f); err == nil {
			t.Errorf("LoadSecret(%s) accepted", filepath.Base(f))
		}
		if _, err := LoadPublic(f); err == nil {
			t.Errorf("LoadPublic(%s) accepted", filepath.Base(f))
		}
	}
}
