package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
)

// Recipients collects the age public keys a backup is encrypted to: keys given inline
// ("age1...") and recipients files (one key per line, '#' comments), as age -r / -R.
func Recipients(keys []string, files []string) ([]age.Recipient, error) {
	var out []age.Recipient
	for _, k := range keys {
		r, err := age.ParseX25519Recipient(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("--encrypt-to %q is not an age public key (age1...): %w", k, err)
		}
		out = append(out, r)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--encrypt-to-file: %w", err)
		}
		rs, err := age.ParseRecipients(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("--encrypt-to-file %s: %w", f, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Identities reads an age identity file (AGE-SECRET-KEY-... lines, as age-keygen and
// ferry keygen write). The error never quotes the file's content.
func Identities(path string) ([]age.Identity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--identity-file: %w", err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("--identity-file %s holds no valid age identity (expected AGE-SECRET-KEY-1... lines)", path)
	}
	return ids, nil
}

// NewIdentity generates an X25519 identity: the file content to keep secret and the
// public key to encrypt to.
func NewIdentity() (secret, public string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", "", err
	}
	return id.String(), id.Recipient().String(), nil
}

// Encrypt returns a writer that encrypts to w for recipients; Close finishes the file.
func Encrypt(w io.Writer, recipients []age.Recipient) (io.WriteCloser, error) {
	ew, err := age.Encrypt(w, recipients...)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	return ew, nil
}

// ErrNoIdentity means an encrypted file was met and no identity was given.
var ErrNoIdentity = errors.New("the backup is encrypted: pass --identity-file with the age identity (secret key) it was encrypted to")

// Decrypt returns a reader of the plaintext of the age file r. A file that none of ids
// can open gives a clear error.
func Decrypt(r io.Reader, ids []age.Identity) (io.Reader, error) {
	if len(ids) == 0 {
		return nil, ErrNoIdentity
	}
	d, err := age.Decrypt(r, ids...)
	var noMatch *age.NoIdentityMatchError
	if errors.As(err, &noMatch) {
		return nil, errors.New("wrong key: the --identity-file does not match any recipient the backup was encrypted to")
	}
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	return d, nil
}
