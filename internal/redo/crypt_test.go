package redo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEncryptedLog copies the redo log of a server that encrypts it
// (innodb_encrypt_log=ON, FormatKey) with both of file_key_management's algorithms,
// under DDL: the tailer reads the encrypted file-level records with the key file
// (CREATE, RENAME, DROP and a DATA DIRECTORY table seen by name), refuses to start
// without keys, CheckKey accepts the right key and refuses another, and
// LocalizeFileNames rewrites the DATA DIRECTORY name inside the encrypted records so
// that the log still verifies and decrypts to the local name.
func TestEncryptedLog(t *testing.T) {
	for _, alg := range []string{"aes_cbc", "aes_ctr"} {
		t.Run(alg, func(t *testing.T) { encryptedLogCycle(t, alg) })
	}
}

func encryptedLogCycle(t *testing.T, alg string) {
	dir := t.TempDir()
	keys := testKeys(t)
	keyFile := filepath.Join(dir, "keys.txt")
	var lines strings.Builder
	for id := uint32(1); id <= 2; id++ {
		fmt.Fprintf(&lines, "%d;%s\n", id, hex.EncodeToString(keys[id]))
	}
	if err := os.WriteFile(keyFile, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "8M", "--plugin-load-add=file_key_management", "--file-key-management-filename="+keyFile,
		"--file-key-management-encryption-algorithm="+alg, "--innodb-encrypt-log=ON", "--innodb-encrypt-tables=ON")
	loadSetup(t, s)
	keyFn := func(id, version uint32) ([]byte, error) {
		if k, ok := keys[id]; ok && version == 1 {
			return k, nil
		}
		return nil, fmt.Errorf("no key %d version %d", id, version)
	}
	if _, err := Open(Config{Path: s.logPath(), Out: new(bytes.Buffer), Server: s, OnFileOp: func(FileOp) {}}); !errors.Is(err, ErrNeedKey) {
		t.Fatalf("Open without keys = %v, want ErrNeedKey", err)
	}
	var out bytes.Buffer
	var mu sync.Mutex
	var ops []FileOp
	pages := NewPageSet(0)
	tl, err := Open(Config{Path: s.logPath(), Out: &out, Server: s, Keys: keyFn, Algorithm: alg, Pages: pages,
		OnFileOp: func(op FileOp) { mu.Lock(); ops = append(ops, op); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if tl.Header().Format != FormatKey {
		t.Fatalf("format %#x: the server does not write the encrypted format this test is for", tl.Header().Format)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := runTailer(ctx, tl)
	remote := filepath.Join(dir, "remote")
	for i, q := range []string{"CREATE TABLE d.c1 (id INT PRIMARY KEY) ENGINE=InnoDB", "RENAME TABLE d.c1 TO d.c2",
		"DROP TABLE d.c2", "CREATE TABLE d.far (id INT PRIMARY KEY) ENGINE=InnoDB DATA DIRECTORY='" + remote + "'",
		"INSERT INTO d.far SELECT seq FROM d.seq_1_to_1000"} {
		s.exec(t, q)
		if err := update(s, i); err != nil {
			t.Fatal(err)
		}
	}
	stopAtCurrent(ctx, t, s, tl, done)
	checkDDLOps(t, ops)
	farName := filepath.Join(remote, "d", "far.ibd")
	if !hasOp(ops, FileCreate, farName) {
		t.Fatalf("no FILE_CREATE of %s among %+v", farName, ops)
	}
	// The page ids are inside the encrypted record bodies: the 1,000 rows inserted
	// into d.far must show as pages of its tablespace, and its root page among them.
	taken, _ := pages.Take()
	if far := taken[spaceOf(t, farName)]; !contains(far, 3) {
		t.Fatalf("the tracked pages of d.far are %v; its root page 3 is not among them", far)
	}

	log := out.Bytes()
	if _, err := VerifyLinear(log, nil, ""); !errors.Is(err, ErrNeedKey) {
		t.Errorf("VerifyLinear without keys = %v, want ErrNeedKey", err)
	}
	if err := CheckKey(log, keyFn, alg); err != nil {
		t.Errorf("CheckKey with the right key: %v", err)
	}
	wrong := testKeys(t)
	wrongFn := func(id, _ uint32) ([]byte, error) { return wrong[id], nil }
	if err := CheckKey(log, wrongFn, alg); !errors.Is(err, ErrWrongKey) {
		t.Errorf("CheckKey with another key = %v, want ErrWrongKey", err)
	}
	if err := CheckLogKey(s.logPath(), keyFn, alg); err != nil {
		t.Errorf("CheckLogKey of the live log with the right key: %v", err)
	}
	if err := CheckLogKey(s.logPath(), wrongFn, alg); !errors.Is(err, ErrWrongKey) {
		t.Errorf("CheckLogKey of the live log with another key = %v, want ErrWrongKey", err)
	}
	n, err := LocalizeFileNames(log, keyFn, alg)
	if err != nil || n == 0 {
		t.Fatalf("LocalizeFileNames = %d, %v", n, err)
	}
	ll, err := VerifyLinear(log, keyFn, alg)
	if err != nil {
		t.Fatalf("VerifyLinear after localizing: %v", err)
	}
	local, _ := LocalName(farName)
	if !hasOp(ll.FileOps, FileCreate, local) || hasOp(ll.FileOps, FileCreate, farName) {
		t.Errorf("after localizing, the log's FILE_CREATE names are %+v; want %s instead of %s", ll.FileOps, local, farName)
	}
	checkDDLOps(t, ll.FileOps)
}

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
