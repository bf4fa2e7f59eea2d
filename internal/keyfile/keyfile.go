// Package keyfile reads the key files of MariaDB's file_key_management plugin: lines of
// "<key id>;<hex key>", optionally encrypted as `openssl enc -aes-256-cbc -md sha1`
// does with the password the plugin's file_key_management_filekey gives.
package keyfile

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Files are the files on a host that hold the keys of a server encrypting data at
// rest with file_key_management: the key file, and the file holding the password it
// is encrypted with (file_key_management_filekey), if any.
type Files struct {
	KeyFile, PasswordFile string
}

// Limits of what Load reads: the plugin's own secret limit, and a bound on key files
// far above any real one (a key file is a few lines).
const (
	maxSecret  = 256
	maxKeyFile = 1 << 20
)

// Keys are the keys of one key file, by key id. file_key_management has one version
// (1) of each key.
type Keys struct {
	path string
	keys map[uint32][]byte
}

// Load reads the key file of f, decrypting it with the password from f.PasswordFile
// when it is encrypted.
func (f Files) Load() (*Keys, error) {
	pw := ""
	if f.PasswordFile != "" {
		var err error
		if pw, err = ReadSecret(f.PasswordFile); err != nil {
			return nil, err
		}
	}
	return Load(f.KeyFile, pw)
}

// ReadSecret reads a password file as the plugin reads file_key_management_filekey=
// FILE:path: at most 256 bytes, trailing line ends removed.
func ReadSecret(path string) (string, error) {
	b, err := readBounded(path, maxSecret+1)
	if err != nil {
		return "", fmt.Errorf("key password file %s: %w", path, err)
	}
	if len(b) > maxSecret {
		return "", fmt.Errorf("key password file %s: longer than the plugin's %d bytes", path, maxSecret)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Secret turns a file_key_management_filekey value into the password: "FILE:path"
// reads it from path, anything else is the password itself.
func Secret(filekey string) (string, error) {
	if p, ok := strings.CutPrefix(filekey, "FILE:"); ok {
		return ReadSecret(p)
	}
	return filekey, nil
}

// Load reads the key file at path; password decrypts it if it is encrypted.
func Load(path, password string) (*Keys, error) {
	b, err := readBounded(path, maxKeyFile+1)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("key file %s: larger than %d bytes, not a file_key_management key file", path, maxKeyFile)
	}
	k, err := Parse(b, password)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	k.path = path
	return k, nil
}

func readBounded(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// salted starts a file encrypted by openssl enc with a salt.
const salted = "Salted__"

// Parse parses the bytes of a key file.
func Parse(b []byte, password string) (*Keys, error) {
	if bytes.HasPrefix(b, []byte(salted)) {
		if password == "" {
			return nil, errors.New("the file is encrypted: give the password file (file_key_management_filekey)")
		}
		var err error
		if b, err = decrypt(b, password); err != nil {
			return nil, err
		}
	}
	k := &Keys{keys: map[uint32][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		if err := k.parseLine(sc.Text()); err != nil {
			if password != "" {
				return nil, fmt.Errorf("line %d: %w (is the password right?)", n, err)
			}
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if _, ok := k.keys[1]; !ok {
		return nil, errors.New("no key with id 1, which the plugin requires")
	}
	return k, nil
}

// parseLine takes one "<id>;<hex key>" line; empty lines and # comments are skipped.
func (k *Keys) parseLine(line string) error {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return nil
	}
	idText, rest, ok := strings.Cut(line, ";")
	if !ok {
		return errors.New(`syntax error: want "<key id>;<hex key>"`)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 32)
	if err != nil || id == 0 {
		return fmt.Errorf("bad key id %q", idText)
	}
	hexKey, _, _ := strings.Cut(strings.TrimSpace(rest), "#")
	key, err := hex.DecodeString(strings.TrimSpace(hexKey))
	if err != nil || (len(key) != 16 && len(key) != 24 && len(key) != 32) {
		return fmt.Errorf("key %d: want 32, 48 or 64 hex digits", id)
	}
	if _, dup := k.keys[uint32(id)]; dup {
		return fmt.Errorf("key id %d appears twice", id)
	}
	k.keys[uint32(id)] = key
	return nil
}

// decrypt opens a file written by `openssl enc -aes-256-cbc -md sha1 -pass ...`: an
// 8-byte magic, an 8-byte salt, then AES-256-CBC with PKCS#7 padding under the key
// and IV of EVP_BytesToKey(SHA-1, one round).
func decrypt(b []byte, password string) ([]byte, error) {
	if len(b) < 16+aes.BlockSize || (len(b)-16)%aes.BlockSize != 0 {
		return nil, errors.New("the encrypted file is truncated")
	}
	salt, body := b[8:16], b[16:]
	key, iv := bytesToKey([]byte(password), salt)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(body))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, body)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errors.New("cannot decrypt it: the password (file_key_management_filekey) is wrong")
	}
	return out[:len(out)-pad], nil
}

// bytesToKey is OpenSSL's EVP_BytesToKey with SHA-1 and one round, for a 32-byte key
// and a 16-byte IV.
func bytesToKey(password, salt []byte) (key, iv []byte) {
	var out, prev []byte
	for len(out) < 48 {
		h := sha1.New()
		h.Write(prev)
		h.Write(password)
		h.Write(salt)
		prev = h.Sum(nil)
		out = append(out, prev...)
	}
	return out[:32], out[32:48]
}

// Key returns the key with id and version, as the plugin's get_key does.
func (k *Keys) Key(id, version uint32) ([]byte, error) {
	if version != 1 {
		return nil, fmt.Errorf("key %d version %d: file_key_management has version 1 only", id, version)
	}
	key, ok := k.keys[id]
	if !ok {
		return nil, fmt.Errorf("key file %s has no key with id %d", k.path, id)
	}
	return key, nil
}
