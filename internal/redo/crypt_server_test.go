//go:build e2e

package redo

import (
	"bytes"
	"context"
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
