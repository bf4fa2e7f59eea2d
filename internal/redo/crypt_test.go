package redo

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// testKeys returns random 32-byte keys with ids 1 and 2.
func testKeys(t *testing.T) map[uint32][]byte {
	keys := map[uint32][]byte{}
	for id := uint32(1); id <= 2; id++ {
		keys[id] = make([]byte, 32)
		if _, err := rand.Read(keys[id]); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func hasOp(ops []FileOp, kind FileOpKind, name string) bool {
	for _, op := range ops {
		if op.Kind == kind && op.Name == name {
			return true
		}
	}
	return false
}

// TestLogCryptRoundTrip: Encrypt then Decrypt gives the records back, for record
// streams shorter than, equal to and longer than a block, in both modes, and only
// the bodies change (the type and length bytes stay clear).
func TestLogCryptRoundTrip(t *testing.T) {
	for _, ctr := range []bool{false, true} {
		c, err := NewLogCrypt(Header{Format: FormatKey, Crypt: [28]byte{3: 1, 7: 1}}, func(uint32, uint32) ([]byte, error) {
			return make([]byte, 16), nil
		}, map[bool]string{false: "aes_cbc", true: "aes_ctr"}[ctr])
		if err != nil {
			t.Fatal(err)
		}
		nonce := []byte{0, 0, 0, 0, 0, 1, 2, 3}
		for _, recs := range [][]byte{
			{0xB4, 1, 0, 'x', 'y'}, // 3-byte body: all in the tail
			append([]byte{0x80, 0x02}, bytes.Repeat([]byte{7}, 16)...), // long form, one block
			append(append([]byte{0x8F}, bytes.Repeat([]byte{1}, 15)...), append([]byte{0x90, 0x20}, bytes.Repeat([]byte{9}, 46)...)...),
		} {
			enc := append([]byte(nil), recs...)
			if err := c.Encrypt(enc, nonce); err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(enc, recs) || enc[0] != recs[0] {
				t.Errorf("ctr=%v: Encrypt(% x) = % x: bodies unchanged or header changed", ctr, recs, enc)
			}
			dec, err := c.Decrypt(enc, nonce)
			if err != nil || !bytes.Equal(dec, recs) {
				t.Errorf("ctr=%v: round trip of % x = % x, %v", ctr, recs, dec, err)
			}
		}
	}
}
