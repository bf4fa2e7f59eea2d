// Package signing makes and checks the Ed25519 signatures that authenticate a
// repository backup's manifest (docs/security.md): a secret key on the backup host
// signs, the public key ("ferrysign1...") lets restore and verify refuse a manifest
// anyone else wrote.
package signing

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Algorithm names the signature scheme in a manifest.
const Algorithm = "ed25519"

// The prefixes of the two key encodings.
const (
	publicPrefix = "ferrysign1"
	secretPrefix = "FERRY-SIGNING-SECRET-KEY-1-"
)

// maxKeyFile bounds what is read of a key file.
const maxKeyFile = 64 << 10

var b64 = base64.RawURLEncoding

// NewKey returns a new secret key, as a key file's line, and its public key.
func NewKey() (secret, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("make a signing key: %w", err)
	}
	return secretPrefix + b64.EncodeToString(priv.Seed()), PublicString(pub), nil
}

// PublicString encodes a public key: "ferrysign1" and its 32 bytes in base64url.
func PublicString(pub ed25519.PublicKey) string { return publicPrefix + b64.EncodeToString(pub) }

// ParsePublic reads a public key as PublicString writes it.
func ParsePublic(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, publicPrefix)
	b, err := b64.DecodeString(rest)
	if !ok || err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%q is not a ferry signing public key (ferrysign1..., as ferry keygen prints it)", clip(s))
	}
	return ed25519.PublicKey(b), nil
}

// LoadPublic reads a public key given inline ("ferrysign1...") or as a file holding it
// (a key file's "# public key:" line counts, so the secret key file works too).
func LoadPublic(arg string) (ed25519.PublicKey, error) {
	if strings.HasPrefix(strings.TrimSpace(arg), publicPrefix) {
		return ParsePublic(arg)
	}
	b, err := readKeyFile(arg)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "# public key:"))
		if strings.HasPrefix(line, publicPrefix) {
			return ParsePublic(line)
		}
	}
	return nil, fmt.Errorf("%s holds no ferry signing public key (ferrysign1...)", arg)
}

// LoadSecret reads the secret key of a key file ferry keygen --signing wrote.
func LoadSecret(path string) (ed25519.PrivateKey, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), secretPrefix)
		if !ok {
			continue
		}
		seed, err := b64.DecodeString(rest)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("%s: the signing key is damaged", path)
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	return nil, fmt.Errorf("%s holds no ferry signing secret key (ferry keygen makes one)", path)
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("signing key %s: larger than %d bytes, not a key file", path, maxKeyFile)
	}
	return b, nil
}

// KeyID names a public key in a signature: the first 8 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Signature is a signature as a manifest carries it.
type Signature struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	Value     string `json:"value"` // base64url
}

// Sign signs msg with priv.
func Sign(priv ed25519.PrivateKey, msg []byte) *Signature {
	pub, _ := priv.Public().(ed25519.PublicKey)
	return &Signature{Algorithm: Algorithm, KeyID: KeyID(pub), Value: b64.EncodeToString(ed25519.Sign(priv, msg))}
}

// ErrUntrusted is returned for a missing, foreign or invalid signature.
var ErrUntrusted = errors.New("not signed by the trusted key")

// Verify checks that sig is pub's signature of msg.
func Verify(pub ed25519.PublicKey, msg []byte, sig *Signature) error {
	if sig == nil {
		return fmt.Errorf("%w: the manifest carries no signature", ErrUntrusted)
	}
	if sig.Algorithm != Algorithm {
		return fmt.Errorf("%w: signature algorithm %q", ErrUntrusted, clip(sig.Algorithm))
	}
	if sig.KeyID != KeyID(pub) {
		return fmt.Errorf("%w: signed by key %s, the trusted key is %s", ErrUntrusted, clip(sig.KeyID), KeyID(pub))
	}
	b, err := b64.DecodeString(sig.Value)
	if err != nil || !ed25519.Verify(pub, msg, b) {
		return fmt.Errorf("%w: the signature does not match its content (changed after it was signed)", ErrUntrusted)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
